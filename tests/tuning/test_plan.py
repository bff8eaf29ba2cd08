"""Plans: what a tuning run chose, applied to a freshly built model without searching; refused when it does not fit."""

from __future__ import annotations

import copy

import loop_app
import msgspec
import orjson
import pytest
import torch
from cli_helpers import ROOT

import aitune.torch as ait
from aitune.errors import TuningError
from aitune.torch.backends import BACKENDS, AutocastBackend
from aitune.torch.tuning.paths import WHOLE, unwrap
from aitune.torch.tuning.plan_apply import apply_plan
from aitune.torch.tuning.plan_check import checked_plan, load_plan, plan_problems
from aitune.torch.tuning.plan_model import (
    BACKEND_CONFIGS,
    MAX_EXAMPLE_ELEMENTS,
    MAX_GRAPHS,
    MAX_REGIONS,
    MAX_THREADS,
)
from aitune.torch.tuning.plan_schema import SHIPPED, plan_schema
from aitune.torch.tuning.plan_write import TunedRegion, make_plan, replayed_plan
from tuning.conftest import onnxruntime_encoder


@pytest.fixture(scope="module")
def plan():
    """A real plan: the loop app's encoder tuned on ONNX Runtime (first-wins: it wins by passing the gate)."""
    pipe = loop_app.build()
    try:
        return make_plan("loop_app.Pipeline", [onnxruntime_encoder(pipe)], {"rtol": None, "atol": None})
    finally:
        unwrap(pipe, ["encoder"])


def test_a_plan_names_each_region_its_module_type_backend_and_environment(plan):
    (region,) = plan["regions"]

    assert plan["kind"] == "aitune-plan" and plan["schema_version"] == 1
    assert region["path"] == "encoder" and region["mode"] == "aot"
    assert region["module_type"] == "loop_app.Encoder"
    assert {backend["name"] for backend in region["backends"].values()} == {"onnxruntime"}
    assert region["speedup_vs_eager"] is not None
    assert plan["environment"]["torch"] == torch.__version__


def test_applying_a_plan_puts_a_tuned_wrapper_at_its_path(plan):
    pipe = loop_app.build()
    plain = pipe.encoder(loop_app.x)

    applied = apply_plan(pipe, plan)
    try:
        assert isinstance(pipe.encoder, ait.Module) and pipe.encoder.state.value == "tuned"
        assert torch.allclose(pipe.encoder(loop_app.x), plain, rtol=1e-3, atol=1e-4)
        assert applied.environment_differences == []
    finally:
        unwrap(pipe, list(applied.wrappers))


def test_a_plan_for_another_module_type_is_refused_before_anything_changes(plan):
    pipe = loop_app.build()
    pipe.encoder = torch.nn.Identity()

    with pytest.raises(TuningError, match=r"made on a loop_app.Encoder at 'encoder', but this model has a .*Identity"):
        apply_plan(pipe, plan)

    assert type(pipe.encoder) is torch.nn.Identity


def test_a_plan_whose_path_is_missing_is_refused(plan):
    with pytest.raises(TuningError, match="nothing at 'encoder'"):
        apply_plan(torch.nn.Linear(2, 2), plan)


def test_a_plan_made_elsewhere_warns_and_still_applies(plan):
    pipe = loop_app.build()
    elsewhere = {**plan, "environment": {**plan["environment"], "torch": "0.0.0+elsewhere"}}  # never this torch

    with pytest.warns(UserWarning, match=r"made with torch 0\.0\.0\+elsewhere \(here .*\)"):
        applied = apply_plan(pipe, elsewhere)

    unwrap(pipe, list(applied.wrappers))
    assert applied.environment_differences == [f"torch 0.0.0+elsewhere (here {torch.__version__})"]


@pytest.mark.parametrize(
    ("bad", "sentence"),
    [
        ({"kind": "something-else"}, "is not an aitune plan"),
        ({"schema_version": 99}, "has plan schema_version 99; this aitune reads version 1"),
    ],
)
def test_a_file_that_is_no_current_plan_is_refused_with_one_sentence(plan, bad, sentence):
    with pytest.raises(TuningError, match=sentence):
        apply_plan(loop_app.build(), {**plan, **bad})


def test_the_empty_path_wraps_the_model_itself_in_place():
    model = loop_app.Encoder().eval()

    wrappers = ait.wrap(model, [WHOLE])
    try:
        assert wrappers[WHOLE].name == "Encoder" and wrappers[WHOLE].module is model
        assert model.forward.__self__ is wrappers[WHOLE]
    finally:
        unwrap(model, [WHOLE])

    assert "forward" not in vars(model)


# --- a plan is data: one schema, limits with their reasons, the written plan rebuilt from what was checked ---

GOOD = ROOT / "tests" / "hostile" / "plans" / "good.plan.json"


def test_the_plan_tune_makes_passes_its_own_schema(plan):
    assert plan_problems(plan) == []
    assert checked_plan(plan) == plan  # already in the normalised form


def test_unknown_keys_are_dropped_at_every_level_of_a_loaded_plan():
    good = orjson.loads(GOOD.read_bytes())
    payload = "x" * 10_000
    hostile = copy.deepcopy(good)
    hostile["payload"] = payload
    hostile["target"]["payload"] = payload
    region = hostile["regions"][0]
    region["payload"] = payload
    region["wrapper"]["payload"] = payload
    region["wrapper"]["graphs"][0]["payload"] = payload
    next(iter(region["wrapper"]["tuned_backends"].values()))["payload"] = payload

    assert load_plan(hostile) == good
    assert payload not in orjson.dumps(load_plan(hostile)).decode()


def test_the_plan_written_after_applying_one_is_made_from_the_wrappers_in_place(plan):
    pipe = loop_app.build()
    hostile = {**copy.deepcopy(plan), "payload": "x" * 1000, "created_at": "1999-01-01T00:00:00+00:00"}
    hostile["regions"][0]["speedup_vs_eager"] = 1.5
    checked = load_plan(hostile)
    applied = apply_plan(pipe, checked)
    try:
        tuned = [TunedRegion(path, "aot", w.module, w.to_dict(), None) for path, w in applied.wrappers.items()]
        written = replayed_plan("loop_app.Pipeline", tuned, checked)
    finally:
        unwrap(pipe, list(applied.wrappers))

    assert "payload" not in written and written["created_at"] != "1999-01-01T00:00:00+00:00"
    assert written["environment"]["torch"] == torch.__version__  # where it was applied, not what the file said
    assert [region["path"] for region in written["regions"]] == ["encoder"]
    assert written["regions"][0]["speedup_vs_eager"] == 1.5 and checked_plan(written) == written


def test_a_plan_of_more_regions_than_the_limit_is_refused_before_any_is_looked_at():
    good = orjson.loads(GOOD.read_bytes())
    many = {**good, "regions": [{**good["regions"][0], "path": f"m{i}"} for i in range(MAX_REGIONS + 1)]}

    with pytest.raises(TuningError, match=rf"^the plan: regions: .* is too long \(at most {MAX_REGIONS}"):
        apply_plan(torch.nn.Linear(2, 2), many)


def test_a_plan_given_as_a_dict_with_a_nan_is_refused():
    good = orjson.loads(GOOD.read_bytes())
    good["regions"][0]["speedup_vs_eager"] = float("nan")

    with pytest.raises(TuningError, match=r"regions\[0\]\.speedup_vs_eager: nan is not a finite number"):
        load_plan(good)


def test_every_problem_of_a_plan_is_listed_in_path_order_each_with_its_json_path():
    good = orjson.loads(GOOD.read_bytes())
    region = good["regions"][0]
    (graph_id,) = region["wrapper"]["tuned_backends"]
    region["mode"] = "eval"
    region["wrapper"]["tuned_backends"][graph_id]["config"]["dtype"] = "float8"
    good["tolerance"]["rtol"] = -1

    problems = plan_problems(good)

    assert problems == [
        "regions[0].mode: 'eval' is not one of 'aot', 'jit'",
        f"regions[0].wrapper.tuned_backends.{graph_id}.config.dtype: 'float8' is not a dtype autocast computes in: "
        "float16 or bfloat16",
        "tolerance.rtol: -1 is less than the minimum of 0",
    ]


def test_the_schema_states_the_limits_the_model_documents():
    schema = plan_schema()
    defs = schema["$defs"]
    (shape, _null) = defs["Graph"]["properties"]["max_shapes"]["items"]["anyOf"]

    assert schema["properties"]["regions"]["maxItems"] == MAX_REGIONS
    assert defs["Wrapper"]["properties"]["graphs"]["maxItems"] == MAX_GRAPHS
    assert shape["items"]["maximum"] == MAX_EXAMPLE_ELEMENTS
    assert defs["OnnxruntimeConfig"]["properties"]["intra_op_threads"]["maximum"] == MAX_THREADS


def test_the_shipped_schema_is_the_one_the_model_generates():
    """Fails when a Struct changed and the file did not: run ``python -m aitune.torch.tuning.plan_schema``."""
    assert SHIPPED.file.read_text(encoding="utf-8") == SHIPPED.text()


def test_the_model_knows_exactly_the_backends_this_aitune_has():
    assert set(BACKEND_CONFIGS) == set(BACKENDS)


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_every_backend_has_a_config_in_the_model_that_takes_its_defaults(name):
    """A backend given a new option needs it in plan_model.py, or its plans would be refused."""
    backend = AutocastBackend("bfloat16") if name == "autocast" else BACKENDS[name]()
    good = orjson.loads(GOOD.read_bytes())
    wrapper = good["regions"][0]["wrapper"]
    graph_id = wrapper["graphs"][0]["graph_id"]
    wrapper["tuned_backends"][graph_id] = good["regions"][0]["backends"][graph_id] = backend.to_dict()
    good["precision"] = good["regions"][0]["precision"] = backend.precision  # a reduced backend needs its plan's

    assert plan_problems(good) == []
    assert set(backend.config()) == {option.encode_name for option in msgspec.structs.fields(BACKEND_CONFIGS[name])}
