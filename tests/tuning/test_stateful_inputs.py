"""Inputs with state: every recorded sample is an independent snapshot, reference and candidate start
from the same state, and a plan never carries (nor imports) an object it cannot rebuild."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import t5_generate_app
import torch
from torch import nn

import aitune.torch as ait
from aitune.errors import TuningError
from aitune.torch.backends import BACKENDS, Backend, BuildContext, Built
from aitune.torch.graphs.graph_spec import GraphSpec, parse_structure
from aitune.torch.graphs.structure import structure_id
from aitune.torch.performance.regions import qualified_type
from aitune.torch.tuning.correctness import check_outputs
from aitune.torch.tuning.plan_write import TunedRegion, make_plan

from .conftest import FAST_MEASURE

APPS = Path(__file__).resolve().parent.parent / "apps"


class ForwardAgain(Backend):
    """Runs the module's own forward: right on any input, so only a gate that gave reference and candidate
    different state could reject it."""

    name = "forward_again"

    def build(self, context: BuildContext) -> Built:
        return Built(run=context.forward)


class ForgetsState(Backend):
    """Wrong on stateful inputs: runs the forward on a private copy, so the caller's state never changes."""

    name = "forgets_state"

    def build(self, context: BuildContext) -> Built:
        forward = context.forward
        return Built(run=lambda *args, **kwargs: forward(*copy.deepcopy(args), **copy.deepcopy(kwargs)))


class RunningState:
    """A cache-like object a forward grows in place, as ``generate`` does with its cache."""

    def __init__(self) -> None:
        self.calls = 0
        self.total = torch.zeros(3)


class Accumulate(nn.Module):
    def forward(self, x: torch.Tensor, state: RunningState | None = None) -> torch.Tensor:
        if state is None:
            return x * 2
        state.calls += 1
        state.total = state.total + x
        return x * state.calls + state.total


def one_backend(backend: Backend) -> ait.OneBackendStrategy:
    return ait.OneBackendStrategy(backend, measure=FAST_MEASURE)


def record_shared_state(wrapper: ait.Module, calls: int = 3) -> RunningState:
    state = RunningState()
    for index in range(calls):
        wrapper(torch.full((3,), float(index + 1)), state=state)
    return state


def test_a_t5_decoder_recorded_in_generate_passes_the_gate_and_generates_the_same_tokens():
    model, ids = t5_generate_app.build()
    expected = t5_generate_app.generate(model, ids)
    assert len(expected.unique()) > 3  # varied tokens: a decoder fed the wrong cache would change them
    wrapper = ait.wrap(model, "decoder")["decoder"]
    try:
        assert torch.equal(t5_generate_app.generate(model, ids), expected)  # recording changes nothing
        (spec,) = wrapper.graph_specs
        assert spec.sample_count == t5_generate_app.NEW_TOKENS  # one graph although every cache differs
        assert spec.structure["kwargs"]["cache"] == {"object": "transformers.cache_utils.EncoderDecoderCache"}

        report = wrapper.tune(strategy=one_backend(ForwardAgain()))

        (graph,) = report["graphs"]
        (candidate,) = graph["candidates"]
        assert graph["winner"] == "forward_again", candidate["reason"]
        assert candidate["max_abs_error"] == 0.0
        assert torch.equal(t5_generate_app.generate(model, ids), expected)
    finally:
        ait.unwrap(model, "decoder")


@pytest.mark.slow
def test_a_t5_decoder_compiled_by_inductor_generates_the_same_tokens():
    model, ids = t5_generate_app.build()
    expected = t5_generate_app.generate(model, ids)
    wrapper = ait.wrap(model, "decoder")["decoder"]
    try:
        t5_generate_app.generate(model, ids)
        report = wrapper.tune(strategy=one_backend(ait.InductorBackend()))
        (graph,) = report["graphs"]
        assert graph["winner"] == "inductor", graph["candidates"][0]["reason"]
        assert torch.equal(t5_generate_app.generate(model, ids), expected)
    finally:
        ait.unwrap(model, "decoder")


def test_reference_and_candidate_start_from_the_same_state_and_the_samples_stay_untouched(wrapped):
    wrapper = wrapped(Accumulate(), name="accumulate")
    live = record_shared_state(wrapper)

    report = wrapper.tune(strategy=one_backend(ForwardAgain()), dry_run=True)

    (graph,) = report["graphs"]
    assert graph["winner"] == "forward_again", graph["candidates"][0]["reason"]
    (samples,) = wrapper._self_recording.samples.values()
    assert [sample.kwargs["state"].calls for sample in samples] == [0, 1, 2]  # as each call found it
    assert [float(sample.kwargs["state"].total[0]) for sample in samples] == [0.0, 1.0, 3.0]
    assert live.calls == 3 and float(live.total[0]) == 6.0  # tuning never touched the live object


def test_a_candidate_that_does_not_update_the_state_as_the_original_does_is_rejected(wrapped):
    wrapper = wrapped(Accumulate(), name="accumulate")
    record_shared_state(wrapper)

    report = wrapper.tune(strategy=one_backend(ForgetsState()))

    (candidate,) = report["graphs"][0]["candidates"]
    assert candidate["status"] == "rejected"
    assert "input state after the call ['kwargs']['state'].calls: value 0 differs from 1" in candidate["reason"]


class AddsInPlace(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.add_(1.0) * 2


class MutatesInputs(Backend):
    """Right outputs, but it changes the caller's tensors in place where the original does not."""

    name = "mutates_inputs"

    def build(self, context: BuildContext) -> Built:
        forward = context.forward

        def run(x: torch.Tensor) -> torch.Tensor:
            output = forward(x.clone())
            x.zero_()
            return output

        return Built(run=run)


def test_a_forward_changing_its_input_tensors_in_place_gets_a_fresh_copy_for_every_run(wrapped):
    wrapper = wrapped(AddsInPlace(), name="adds")
    wrapper(torch.zeros(3))

    report = wrapper.tune(strategy=one_backend(ForwardAgain()), dry_run=True)

    assert report["graphs"][0]["winner"] == "forward_again", report["graphs"][0]["candidates"][0]["reason"]
    ((sample,),) = wrapper._self_recording.samples.values()
    assert torch.equal(sample.args[0], torch.zeros(3))  # no run changed the snapshot


def test_a_candidate_changing_input_tensors_the_original_leaves_alone_is_rejected(wrapped):
    wrapper = wrapped(nn.Identity(), name="identity")
    wrapper(torch.ones(3))

    report = wrapper.tune(strategy=one_backend(MutatesInputs()))

    (candidate,) = report["graphs"][0]["candidates"]
    assert candidate["reason"] == (
        "outside tolerance: sample 0: it changed its input tensors in place, which the original does not"
    )


class Handle:
    """An object with no attributes and no equality: nothing the gate could compare."""

    __slots__ = ()


def test_an_output_object_the_gate_cannot_compare_is_named_in_the_reason():
    agreement = check_outputs([{"handle": Handle()}], [{"handle": Handle()}], ait.Tolerance())

    assert agreement.problem == (
        "sample 0, output ['handle']: a Handle object, which the gate cannot compare (it defines no equality"
        " and holds no attributes)"
    )


class Locked:
    def __init__(self) -> None:
        self.lock = threading.Lock()


class UsesLock(nn.Module):
    def forward(self, x: torch.Tensor, guard: Locked) -> torch.Tensor:
        with guard.lock:
            return x + 1


def test_inputs_that_cannot_be_snapshotted_keep_the_graph_eager_with_the_reason(wrapped):
    wrapper = wrapped(UsesLock(), name="locked")
    guard = Locked()
    wrapper(torch.ones(2), guard)

    report = wrapper.tune(strategy=one_backend(ForwardAgain()))

    (graph,) = report["graphs"]
    (candidate,) = graph["candidates"]
    assert (graph["winner"], candidate["status"]) == ("eager", "skipped")
    assert candidate["reason"].startswith("not tried, the graph stays eager: the inputs cannot be copied (TypeError")
    assert torch.equal(wrapper(torch.ones(2), guard), torch.full((2,), 2.0))


def test_an_object_input_is_stored_by_type_only_and_the_graph_id_ignores_its_value(wrapped):
    wrapper = wrapped(Accumulate(), name="accumulate")
    for size in (3, 3):
        wrapper(torch.ones(size), state=RunningState())

    (spec,) = wrapper.graph_specs
    saved = json.dumps(spec.to_dict())

    assert spec.sample_count == 2
    assert spec.structure["kwargs"]["state"] == {"object": f"{__name__}.RunningState"}
    assert "0x" not in saved and "object at" not in saved  # never a repr
    assert parse_structure(spec.structure).objects == [f"{__name__}.RunningState"]
    assert GraphSpec.from_dict(json.loads(saved)) == spec
    assert spec.example() is None  # an object cannot be rebuilt synthetically


def restored_accumulate(monkeypatch, backend: Backend) -> ait.Module:
    """An `Accumulate` tuned with `ForwardAgain` on a plain call and on a call with a `RunningState`, saved, and
    restored from its saved form with ``backend`` as the object graph's winner."""
    monkeypatch.setitem(BACKENDS, ForwardAgain.name, ForwardAgain)
    monkeypatch.setitem(BACKENDS, backend.name, type(backend))
    wrapper = ait.Module(Accumulate(), name="accumulate")
    try:
        wrapper(torch.ones(3))
        record_shared_state(wrapper, calls=1)
        wrapper.tune(strategy=one_backend(ForwardAgain()))
        saved = wrapper.to_dict()
    finally:
        wrapper.close()
    object_graph = next(g["graph_id"] for g in saved["graphs"] if parse_structure(g["structure"]).objects)
    saved["tuned_backends"][object_graph] = backend.to_dict()
    return ait.Module.from_dict(Accumulate(), saved)


def runners_by_kind(wrapper: ait.Module) -> dict[str, tuple[str, bool, bool]]:
    """Per graph, ``"object"`` or ``"tensor"``: its runner's backend, whether it is eager and whether it waits."""
    return {
        "object" if parse_structure(spec.structure).objects else "tensor": (
            wrapper._self_runners[spec.graph_id].backend,
            wrapper._self_runners[spec.graph_id].is_eager,
            wrapper._self_runners[spec.graph_id].is_deferred,
        )
        for spec in wrapper.graph_specs
    }


def test_a_graph_whose_inputs_hold_objects_is_built_on_its_first_real_call_under_the_gate(monkeypatch):
    again = restored_accumulate(monkeypatch, ForwardAgain())
    try:
        waiting = runners_by_kind(again)
        state, expected_state = RunningState(), RunningState()
        outputs = [again(torch.full((3,), float(i)), state=state) for i in (1, 2)]
        expected = [Accumulate()(torch.full((3,), float(i)), state=expected_state) for i in (1, 2)]
        built = runners_by_kind(again)
    finally:
        again.close()

    assert waiting == {"tensor": ("forward_again", False, False), "object": ("forward_again", False, True)}
    assert built["object"] == ("forward_again", False, False)
    assert all(torch.equal(out, ref) for out, ref in zip(outputs, expected, strict=True))
    assert (state.calls, torch.equal(state.total, expected_state.total)) == (2, True)


def test_a_deferred_build_the_gate_refuses_on_the_real_call_runs_eager_and_says_why(monkeypatch, caplog):
    again = restored_accumulate(monkeypatch, ForgetsState())
    try:
        state = RunningState()
        outputs = [again(torch.full((3,), float(i)), state=state) for i in (1, 2)]
        after = runners_by_kind(again)
    finally:
        again.close()

    assert after["object"] == ("eager", True, False)
    assert "restoring forgets_state for 'accumulate' failed (outside tolerance: sample 0, input state" in caplog.text
    assert state.calls == 2 and torch.equal(outputs[1], torch.full((3,), 2.0) * 2 + torch.full((3,), 3.0))


def test_a_deferred_graph_whose_real_call_cannot_be_snapshotted_stays_eager(monkeypatch, caplog):
    again = restored_accumulate(monkeypatch, ForwardAgain())
    state = RunningState()
    state.lock = threading.Lock()  # a lock cannot be copied: no snapshot, so no gate, so no backend
    try:
        output = again(torch.ones(3), state=state)
        after = runners_by_kind(again)
    finally:
        again.close()

    assert after["object"] == ("eager", True, False)
    assert "forward_again for 'accumulate' runs eager: the inputs cannot be copied" in caplog.text
    assert torch.equal(output, torch.ones(3) * 2)


def write_inductor_plan(path: Path, model: nn.Module, region: str, run: Callable[[], Any]) -> dict[str, Any]:
    """A plan for ``model``'s ``region`` as tune would write it had Inductor won, recorded on ``run()``: tuned with
    `ForwardAgain` (cheap), its winners renamed to Inductor, which a replay builds on the first real calls. The
    region's saved form, as the plan holds it."""
    wrapper = ait.wrap(model, region)[region]
    try:
        run()
        wrapper.tune(strategy=one_backend(ForwardAgain()))
        saved = wrapper.to_dict()
    finally:
        ait.unwrap(model, region)
    saved["tuned_backends"] = {gid: ait.InductorBackend().to_dict() for gid in saved["tuned_backends"]}
    tuned = TunedRegion(region, "aot", model.get_submodule(region), saved, wrapper.outcome)
    path.write_text(json.dumps(make_plan(type(model).__name__, [tuned], {})))
    return saved


def write_t5_plan(path: Path) -> Path:
    """A plan for the T5 decoder, as tune would write it had Inductor won."""
    model, ids = t5_generate_app.build()
    write_inductor_plan(path, model, "decoder", lambda: t5_generate_app.generate(model, ids))
    return path


@pytest.mark.slow
def test_a_plan_of_a_decoder_fed_a_cache_object_replays_in_a_fresh_process_on_unseen_prompts(tmp_path):
    write_t5_plan(tmp_path / "plan.json")

    script = f"""
import sys, torch
sys.path.insert(0, {str(APPS)!r})
import t5_generate_app, aitune.torch as ait
model, _ = t5_generate_app.build()
prompts = [torch.randint(2, 64, (batch, length), generator=torch.Generator().manual_seed(length))
           for batch, length in ((1, 4), (3, 9))]  # lengths and batches the plan never saw
before = [t5_generate_app.generate(model, ids) for ids in prompts]
applied = ait.apply_plan(model, {str(tmp_path / "plan.json")!r})
after = [t5_generate_app.generate(model, ids) for ids in prompts]
runners = applied.wrappers["decoder"]._self_runners.values()
print("SAME", all(torch.equal(a, b) for a, b in zip(before, after)))
print("BUILT", sorted({{(r.backend, r.is_deferred) for r in runners}}))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=900)

    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    same, built = done.stdout.splitlines()[-2:]
    assert same == "SAME True"
    assert built == "BUILT [('inductor', False)]"


def evil_plan(structure: Any, graph_id: str) -> dict[str, Any]:
    graph = {"graph_id": graph_id, "structure": structure, "min_shapes": [None], "max_shapes": [None]}
    wrapper = {
        "type": "aitune.aot_module/1",
        "name": "0",
        "state": "tuned",
        "graphs": [graph],
        "tuned_backends": {graph_id: {"name": "inductor", "config": {}}},
    }
    region = {"path": "0", "mode": "aot", "module_type": qualified_type(nn.Linear(1, 1)), "wrapper": wrapper}
    return {"schema_version": 1, "kind": "aitune-plan", "regions": [region]}


def test_a_plan_naming_an_importable_module_never_imports_it(tmp_path):
    marker = tmp_path / "imported.txt"
    (tmp_path / "evil_payload.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\nclass E: A = 1\n")
    enum_spec = json.dumps(
        [1, {"type": "builtins.dict", "context": json.dumps([{"__enum__": True, "fqn": "evil_payload:E", "name": "A"}]),
             "children_spec": [{"type": None, "context": None, "children_spec": []}]}]
    )  # fmt: skip
    new_form = {"args": [{"object": "evil_payload.E"}], "kwargs": {}}
    plans = {
        "treespec": evil_plan(json.dumps([enum_spec, [["value", 1]]]), "0123456789ab"),
        "object": evil_plan(new_form, structure_id(new_form)),
    }
    for name, plan in plans.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(plan))
    script = f"""
import sys
sys.path.insert(0, {str(tmp_path)!r})
import aitune.torch as ait, torch
from aitune.errors import AituneError
for name in ("treespec", "object"):
    try:
        ait.apply_plan(torch.nn.Sequential(torch.nn.Linear(1, 1)), {str(tmp_path)!r} + f"/{{name}}.json")
        print(name, "APPLIED")
    except AituneError as error:
        print(name, "REFUSED", error)
print("IMPORTED", "evil_payload" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)

    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    lines = done.stdout.splitlines()[-3:]
    assert "regions[0].wrapper.graphs[0] stores its structure in the old treespec form" in lines[0]
    assert lines[1] == "object APPLIED"  # the object's type is a name its real calls are matched against
    assert lines[2] == "IMPORTED False"
    assert not marker.exists()


@pytest.mark.parametrize(
    ("structure", "problem"),
    [
        ("[]", 'is not an object with exactly the keys "args" and "kwargs"'),
        ({"args": [{"tensor": "torch.float32", "rank": 1}], "kwargs": {}}, "at args[0] names dtype"),
        ({"args": [{"object": "os.system('x')"}], "kwargs": {}}, "names an object type that is not a dotted type"),
        ({"args": [{"tensor": "float32", "rank": -1}], "kwargs": {}}, "has a rank that is not an integer"),
        ({"args": [], "kwargs": {"x": {"pickle": "..."}}}, "has the unknown node keys pickle"),
    ],
)
def test_a_malformed_structure_is_refused_in_one_sentence(structure, problem):
    with pytest.raises(TuningError) as refused:
        parse_structure(structure)

    assert problem in str(refused.value)
    assert str(refused.value).endswith("; tune again to write a new plan.")


def test_a_deeply_nested_structure_is_refused_not_a_recursion_error():
    node: dict[str, Any] = {"value": 1}
    for _ in range(5000):
        node = {"list": [node]}

    with pytest.raises(TuningError, match="nests deeper than 32 levels"):
        parse_structure({"args": [node], "kwargs": {}})


SAVED_STRUCTURE = {"args": [{"tensor": "float32", "rank": 2}], "kwargs": {"scale": {"value": 2.0}}}


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"graph_id": "0123456789ab"}, "has a graph_id that is not its structure's"),
        ({"min_shapes": [[1, 8]]}, "has min_shapes that is not one entry per input leaf"),
        ({"max_shapes": [[1, 8, 3], None]}, "has max_shapes[0] that does not fit its input"),
        ({"max_shapes": [[1, 10**5000], None]}, "has max_shapes[0] that does not fit its input"),
        ({"min_shapes": [[9, 8], None]}, "has a min shape above its max shape"),
    ],
)
def test_a_saved_graph_whose_id_or_shapes_do_not_fit_its_structure_is_refused(change, problem):
    graph = {
        "graph_id": structure_id(SAVED_STRUCTURE),
        "structure": SAVED_STRUCTURE,
        "min_shapes": [[1, 8], None],
        "max_shapes": [[4, 8], None],
    }
    assert GraphSpec.from_dict(graph).example([[2, 8], None]).args[0].shape == (2, 8)

    with pytest.raises(TuningError) as refused:
        GraphSpec.from_dict({**graph, **change}, "graph 0 of 'block'")

    assert str(refused.value).startswith(f"graph 0 of 'block' {problem}")
