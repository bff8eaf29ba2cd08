"""A candidate wins only if it builds, runs and matches the original; anything else leaves the module as it was."""

from __future__ import annotations

import dataclasses
import json
import logging

import pytest
import torch

import aitune.torch as ait
from aitune.torch.backends.base import Backend, BuildContext, Built
from aitune.torch.graphs.graph_spec import Sample
from aitune.torch.tuning.correctness import check_outputs
from aitune.torch.tuning.trial import Trial

from .conftest import (
    FAST_MEASURE,
    BreakableBackend,
    BrokenBuildBackend,
    BrokenRunBackend,
    DirectLinearBackend,
    OffByBackend,
    SlowLinear,
    tiny_mlp,
)

CANDIDATE_KEYS = {
    "backend",
    "config",
    "precision",
    "status",
    "reason",
    "build_time_s",
    "build_details",
    "latency_median_us",
    "latency_cv",
    "eager_latency_median_us",
    "speedup_vs_eager",
    "speedup_interval",
    "verdict",
    "max_abs_error",
    "cosine_similarity",
    "held_memory",
}


def tune_with(wrapped, strategy, module=None, inputs=None):
    inputs = inputs if inputs is not None else [torch.randn(2, 8), torch.randn(3, 8)]
    wrapper = wrapped(module if module is not None else tiny_mlp(), name="block")
    expected = [wrapper(x) for x in inputs]
    wrapper.enable_recording()
    for x in inputs:
        wrapper(x)
    report = wrapper.tune(strategy=strategy)
    return wrapper, report["graphs"][0], inputs, expected


def test_the_gate_passes_identical_outputs_and_reports_the_figures():
    output = torch.randn(4, 4)

    agreement = check_outputs([output], [output.clone()], ait.Tolerance())

    assert agreement.passed and agreement.max_abs_error == 0.0 and agreement.cosine_similarity == pytest.approx(1.0)


def test_the_gate_rejects_a_finite_but_wrong_output_with_numbers():
    output = torch.randn(4, 4)

    agreement = check_outputs([output], [output + 1e-2], ait.Tolerance())

    assert not agreement.passed
    assert agreement.max_abs_error == pytest.approx(1e-2, rel=1e-3)
    assert "max abs error 0.01 exceeds atol 0.0001 + rtol 0.001·|reference|" in agreement.problem


@pytest.mark.parametrize(
    ("candidate", "problem"),
    [
        (torch.zeros(4, 3), "shape (4, 3) differs from (4, 4)"),
        (torch.zeros(4, 4, dtype=torch.float64), "dtype torch.float64 differs from torch.float32"),
        (torch.full((4, 4), float("nan")), "non-finite values"),
        ((torch.zeros(4, 4),), "output structure differs"),
    ],
)
def test_the_gate_rejects_structure_shape_dtype_and_nan_mismatches(candidate, problem):
    agreement = check_outputs([torch.zeros(4, 4)], [candidate], ait.Tolerance())

    assert problem in agreement.problem


def test_reduced_precision_needs_a_tolerance_that_admits_it():
    assert not ait.Tolerance().admits(torch.bfloat16, torch.float32)
    assert ait.Tolerance(rtol=1e-2).admits(torch.bfloat16, torch.float32)


def _tf32(x: torch.Tensor) -> torch.Tensor:
    """``x`` rounded to float16's 10-bit mantissa, as a TF32 tensor core reads a float32 operand."""
    return ((x.view(torch.int32) + 0x1000) & ~0x1FFF).view(torch.float32)


def tf32_products(scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """A layer's output on a GPU computing in TF32, eager (the product, then a per-channel scale such as a
    batch norm's) and compiled (the scale folded into the weights before they are rounded)."""
    generator = torch.Generator().manual_seed(0)
    x, w = torch.randn(64, 1024, generator=generator), torch.randn(1024, 64, generator=generator) / 32
    channel_scale = (torch.rand(64, generator=generator) + 0.5) * scale
    return (_tf32(x) @ _tf32(w)) * channel_scale, _tf32(x) @ _tf32(w * channel_scale)


@pytest.fixture
def tf32_flags():
    """PyTorch's TF32 flags as a test sets them, put back after it."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32

    def set_flags(convolutions: bool, matrix_products: bool) -> None:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = convolutions, matrix_products

    yield set_flags
    set_flags(*saved)


@pytest.mark.parametrize("scale", [1.0, 16.0])
def test_on_a_device_computing_float32_in_tf32_the_gate_holds_float32_outputs_to_tf32s_resolution(tf32_flags, scale):
    eager, compiled = tf32_products(scale)
    tf32_flags(convolutions=True, matrix_products=False)  # PyTorch's defaults
    on_cpu, on_gpu = ait.Tolerance().on(torch.device("cpu")), ait.Tolerance().on(torch.device("cuda"))

    strict = check_outputs([eager], [compiled], on_cpu)
    passed = check_outputs([eager], [compiled], on_gpu)
    wrong = check_outputs([eager], [compiled + 0.05 * scale], on_gpu)

    assert "rtol 0.001·|reference| at" in strict.problem  # float32's own bar: TF32 rounding fails it
    assert passed.passed and 0 < passed.max_abs_error < 0.01 * scale
    assert "rtol 0.01·|reference| (TF32 level) at" in wrong.problem


def test_with_tf32_off_or_explicit_tolerances_the_float32_bar_stays(tf32_flags):
    eager, compiled = tf32_products()
    tf32_flags(convolutions=False, matrix_products=False)
    untouched = ait.Tolerance().on(torch.device("cuda"))
    tf32_flags(convolutions=False, matrix_products=True)
    explicit = ait.Tolerance(rtol=1e-3, atol=1e-4).on(torch.device("cuda"))

    assert not untouched.tf32 and not check_outputs([eager], [compiled], untouched).passed
    assert explicit.tf32 and not check_outputs([eager], [compiled], explicit).passed
    assert not ait.Tolerance().on(torch.device("cuda")).admits(torch.bfloat16, torch.float32)  # judged on the task


class FoldedTF32Backend(Backend):
    """Returns the compiled side of `tf32_products`, whatever it is called with."""

    name = "folded_tf32"

    def build(self, context: BuildContext) -> Built:
        compiled = tf32_products()[1]
        return Built(run=lambda *args, **kwargs: compiled.clone())


def test_a_trial_judges_float32_outputs_at_the_resolution_of_the_device_it_tunes_for(tf32_flags):
    eager, _ = tf32_products()
    tf32_flags(convolutions=True, matrix_products=False)
    layer, sample = torch.nn.Identity(), Sample((torch.zeros(1),), {})

    def verdict(device: str) -> tuple[str, str | None]:
        # The trial reads the device for the gate's level only: nothing is moved there, nothing is timed.
        context = BuildContext(layer, layer.forward, [sample], [eager], torch.device(device))
        candidate = Trial(context, ait.Tolerance(), FAST_MEASURE, timed=False).evaluate(FoldedTF32Backend())
        return candidate.status, candidate.reason

    assert verdict("cuda") == ("accepted", None)
    assert verdict("cpu")[0] == "rejected" and "rtol 0.001·|reference| at" in verdict("cpu")[1]


def test_a_backend_off_by_1e_2_is_rejected_and_the_module_runs_eager(wrapped):
    strategy = ait.OneBackendStrategy(OffByBackend(1e-2), measure=FAST_MEASURE)

    wrapper, graph, inputs, expected = tune_with(wrapped, strategy)

    candidate = graph["candidates"][0]
    assert (candidate["status"], graph["winner"]) == ("rejected", "eager")
    assert candidate["reason"].startswith("outside tolerance: sample 0, output: max abs error 0.01")
    assert candidate["max_abs_error"] == pytest.approx(1e-2, rel=1e-3)
    assert all(torch.equal(wrapper(x), y) for x, y in zip(inputs, expected, strict=True))


@pytest.mark.parametrize(
    ("backend", "reason"),
    [
        (BrokenBuildBackend(), "build failed: RuntimeError: no kernel for this operator"),
        (BrokenRunBackend(), "run failed: RuntimeError: device lost"),
    ],
)
def test_a_backend_failing_at_build_or_run_falls_back_with_outputs_unchanged(wrapped, backend, reason):
    wrapper, graph, inputs, expected = tune_with(wrapped, ait.FirstWinsStrategy([backend], measure=FAST_MEASURE))

    assert graph["candidates"][0]["reason"] == reason
    assert graph["winner"] == "eager"
    assert all(torch.equal(wrapper(x), y) for x, y in zip(inputs, expected, strict=True))


def test_a_backend_failing_after_tuning_falls_back_to_eager_for_good(wrapped, caplog):
    backend = BreakableBackend()
    wrapper, graph, inputs, expected = tune_with(wrapped, ait.OneBackendStrategy(backend, measure=FAST_MEASURE))
    graph_id = graph["graph_id"]
    assert graph["winner"] == "breakable"
    backend.broken = True

    with caplog.at_level(logging.WARNING):
        outputs = [wrapper(x) for x in inputs]

    assert all(torch.equal(actual, y) for actual, y in zip(outputs, expected, strict=True))
    assert "breakable backend of 'block' failed (engine evicted); running eager" in caplog.text
    assert wrapper.to_dict()["tuned_backends"][graph_id]["name"] == "eager"


def test_a_call_of_sizes_an_export_fixed_runs_eager_once_and_the_build_stays_for_its_sizes(wrapped, caplog):
    pytest.importorskip("onnxruntime")
    strategy = ait.OneBackendStrategy(ait.OnnxRuntimeBackend(), measure=FAST_MEASURE)
    wrapper, graph, _, _ = tune_with(wrapped, strategy, inputs=[torch.randn(2, 8), torch.randn(2, 8)])
    assert graph["winner"] == "onnxruntime"  # one batch size recorded: the export fixes it at 2
    eager = tiny_mlp()
    other, again = torch.randn(5, 8), torch.randn(2, 8)

    with caplog.at_level(logging.WARNING), torch.no_grad():
        outputs = [wrapper(other), wrapper(other), wrapper(again)]

    assert torch.equal(outputs[0], eager(other)) and torch.equal(outputs[1], eager(other))  # eager, not the build
    assert torch.allclose(outputs[2], eager(again), atol=1e-5)
    assert caplog.text.count("takes the sizes it was tuned on only") == 1
    assert "dimension 0 of input 0 is 5; the export fixed it at 2" in caplog.text
    assert wrapper.to_dict()["tuned_backends"][graph["graph_id"]]["name"] == "onnxruntime"


def test_first_wins_keeps_the_first_passing_backend_and_skips_the_rest(wrapped):
    strategy = ait.FirstWinsStrategy([OffByBackend(), ait.EagerBackend(), BrokenBuildBackend()], measure=FAST_MEASURE)

    _, graph, _, _ = tune_with(wrapped, strategy)

    assert [c["status"] for c in graph["candidates"]] == ["rejected", "winner", "skipped"]
    assert graph["candidates"][2]["reason"] == "not tried: eager won first"


def test_min_latency_keeps_a_faster_correct_backend(wrapped):
    strategy = ait.MinLatencyStrategy([DirectLinearBackend()], measure=FAST_MEASURE)

    wrapper, graph, inputs, expected = tune_with(wrapped, strategy, module=SlowLinear(), inputs=[torch.randn(2, 8)])

    assert graph["winner"] == "direct_linear"
    assert graph["candidates"][0]["speedup_vs_eager"] > 1.5
    assert torch.allclose(wrapper(inputs[0]), expected[0])


def test_min_latency_rejects_a_correct_backend_that_is_not_faster_by_the_margin(wrapped):
    strategy = ait.MinLatencyStrategy([ait.EagerBackend()], margin=0.5, measure=FAST_MEASURE)

    _, graph, _, _ = tune_with(wrapped, strategy)

    assert graph["winner"] == "eager"
    # Eager against itself: on a quiet machine the interval falls below 2×; on a busy one it may straddle it.
    assert graph["candidates"][0]["reason"].startswith(("not 50% faster than eager", "no significant difference"))


def test_min_latency_skips_candidates_once_the_time_budget_is_spent(wrapped):
    strategy = ait.MinLatencyStrategy([BrokenRunBackend(), ait.EagerBackend()], time_budget_s=0.0, measure=FAST_MEASURE)

    _, graph, _, _ = tune_with(wrapped, strategy)

    assert [c["status"] for c in graph["candidates"]] == ["skipped", "skipped"]
    assert graph["candidates"][0]["reason"].startswith("not tried: the time budget of 0 s is spent (")


def test_unavailable_and_unadmitted_backends_are_skipped_with_one_line(wrapped):
    strategy = ait.FirstWinsStrategy([ait.TensorRTBackend(), ait.AutocastBackend("bfloat16")], measure=FAST_MEASURE)

    _, graph, _, _ = tune_with(wrapped, strategy)

    reasons = [c["reason"] for c in graph["candidates"]]
    assert reasons[0].startswith("not available: TensorRT needs a CUDA device")
    assert reasons[1].startswith("not offered: rtol 0.001 for torch.float32 outputs is below torch.bfloat16's")
    assert all("\n" not in reason for reason in reasons)


def test_the_tuning_report_has_stable_keys_and_is_json(wrapped, tmp_path):
    model = torch.nn.Sequential(tiny_mlp())
    wrappers = ait.wrap(model, "0")
    try:
        strategy = ait.FirstWinsStrategy([BrokenBuildBackend(), ait.EagerBackend()], measure=FAST_MEASURE)
        report = ait.tune(model, [torch.randn(2, 8)], strategy=strategy, report_file=tmp_path / "tuning.json")
    finally:
        ait.unwrap(model, list(wrappers))

    saved = json.loads((tmp_path / "tuning.json").read_text())
    assert saved["modules"][0]["region_id"] == "aot_module:0"
    assert set(saved) == {"schema_version", "created_at", "aitune_version", "environment", "thread_budget", "modules"}
    assert all(set(c) == CANDIDATE_KEYS for c in saved["modules"][0]["graphs"][0]["candidates"])
    assert saved["modules"] == report["modules"]


class TellingOffByBackend(OffByBackend):
    """Wrong like its parent, and says what it built."""

    name = "telling_off_by"

    def build(self, context):
        return dataclasses.replace(super().build(context), details={"offset": self.offset})


def test_the_report_says_what_each_build_chose_even_for_a_rejected_candidate(wrapped):
    strategy = ait.FirstWinsStrategy([TellingOffByBackend(), ait.OnnxRuntimeBackend()], measure=FAST_MEASURE)

    _, graph, _, _ = tune_with(wrapped, strategy)

    rejected, onnx = graph["candidates"]
    assert (rejected["status"], rejected["build_details"]) == ("rejected", {"offset": 1e-2})
    threads = {"intra_op_threads": torch.get_num_threads(), "inter_op_threads": 1}
    assert (onnx["status"], onnx["build_details"]) == ("winner", {"providers": ["CPUExecutionProvider"], **threads})
