"""Plans: what a tuning run chose, applied to a freshly built model without searching; refused when it does not fit."""

from __future__ import annotations

import loop_app
import pytest
import torch

import aitune.torch as ait
from aitune.errors import TuningError
from aitune.torch.module.paths import WHOLE, unwrap
from aitune.torch.tuning.plan import TunedRegion, apply_plan, make_plan
from aitune.torch.tuning.strategies import named_strategy


@pytest.fixture(scope="module")
def plan():
    """A real plan: the loop app's encoder tuned on ONNX Runtime (first-wins: it wins by passing the gate)."""
    pipe = loop_app.build()
    wrappers = ait.wrap(pipe, ["encoder"])
    try:
        ait.tune(
            pipe, [loop_app.x], modules=list(wrappers.values()), strategy=named_strategy("first-wins", ["onnxruntime"])
        )
        wrapper = wrappers["encoder"]
        region = TunedRegion("encoder", "aot", wrapper.module, wrapper.to_dict(), wrapper.tuning_report)
        return make_plan("loop_app.Pipeline", [region], {"rtol": None, "atol": None})
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
