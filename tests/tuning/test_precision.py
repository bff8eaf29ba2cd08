"""Reduced precision, judged by the task: ``precision`` bf16/int8 on the loop, the task gate on the final output.

Real tiny models (`tests/apps/classifier_app.py`: a classifier whose classes are near-tied, one whose
classes are far apart; a tiny Llama ``generate`` from `tests/hf_models.py`), real int8 dynamic
quantization and bf16 copies; first-wins strategies, so a candidate wins by passing the structural
gate, never by a timing on a shared machine. bf16 runs only where the CPU has bf16 arithmetic; on
other machines its refusal is what is tested.
"""

from __future__ import annotations

import copy
import json

import classifier_app
import pytest
import torch
from cli_helpers import APPS, run_cli
from hf_models import bert_encoder, llama_decoder
from torch import nn

from aitune.compare.quality import TaskJudgment, parse_bar
from aitune.errors import TuningError
from aitune.torch import LoopConfig, optimize
from aitune.torch.precision import precision_unavailable
from aitune.torch.tuning.paths import unwrap
from aitune.torch.tuning.plan_apply import apply_plan
from aitune.torch.tuning.strategies import MinLatencyStrategy, named_strategy
from aitune.torch.tuning.task_gate import output_metric, psnr_db, token_agreement
from aitune.torch.tuning.wrapper import Module

pytestmark = pytest.mark.slow

UNVERIFIED = {"warmup_runs": 1, "measured_runs": 2, "record_calls": 1, "verification": None}
BF16_REFUSED = precision_unavailable("bf16")


def int8_loop(**options) -> LoopConfig:
    strategy = named_strategy("first-wins", ["int8_dynamic"], precision="int8")
    return LoopConfig(targets=("body",), strategy=strategy, precision="int8", **UNVERIFIED, **options)


def test_int8_that_flips_a_classifiers_decisions_is_refused_with_the_figure():
    model = classifier_app.near_tied()
    before = model(classifier_app.x).argmax(-1)

    result = optimize(model, classifier_app.x, config=int8_loop())

    gate = result.task_gate
    assert (gate.metric, gate.minimum, gate.passed) == ("top1_agreement", 0.99, False)
    assert gate.value < 0.99 and gate.regions == ("body",)
    assert result.tuned == [] and not isinstance(model.body, Module)  # put back: the model runs its fp32 code
    assert torch.equal(model(classifier_app.x).argmax(-1), before)
    assert f"top1_agreement {gate.value:.4f} >= 0.99: refused" in gate.line()
    assert result.gains[0].winner == "eager" and "int8_dynamic put back by the task gate" in result.gains[0].reason
    assert result.comparison()["task_gate"]["value"] == gate.value
    assert result.tuning["task_gate"]["passed"] is False and result.plan["regions"] == []


def test_int8_that_keeps_every_decision_passes_and_its_plan_carries_the_figure_and_the_weight_bytes():
    model = classifier_app.well_apart()

    result = optimize(model, classifier_app.x, config=int8_loop())

    assert result.task_gate.passed and result.task_gate.value == 1.0
    assert [region.path for region in result.tuned] == ["body"]
    assert result.plan["precision"] == "int8" and result.plan["task_gate"]["value"] == 1.0
    memory = result.tuning["weight_memory"]
    assert memory["regions"][0]["path"] == "body" and memory["tuned_bytes"] < memory["original_bytes"] / 2
    result.restore()
    fresh = classifier_app.well_apart()
    applied = apply_plan(fresh, result.plan)  # a plan made at int8 brings the int8 backend back
    backends = list(applied.wrappers["body"].to_dict()["tuned_backends"].values())
    assert backends == [{"name": "int8_dynamic", "config": {}}]
    assert torch.equal(fresh(classifier_app.x).argmax(-1), model(classifier_app.x).argmax(-1))
    unwrap(fresh, list(applied.wrappers))


class ConvClassifier(nn.Module):
    """A ResNet's shape in small: convolutions in ``features``, one linear layer in ``head``."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Conv2d(8, 8, 3), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(8, 4)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


def test_int8_on_a_region_of_convolutions_is_not_built_and_says_there_is_no_linear_layer():
    model = ConvClassifier()
    strategy = named_strategy("first-wins", ["int8_dynamic"], precision="int8")
    config = LoopConfig(targets=("features",), strategy=strategy, precision="int8", **UNVERIFIED)

    result = optimize(model, torch.randn(2, 3, 12, 12, generator=torch.Generator().manual_seed(0)), config=config)

    candidate = result.tuning["modules"][0]["graphs"][0]["candidates"][0]
    reason = "no linear layer to quantize (dynamic int8 converts nn.Linear layers only; its 2 convolution(s) stay fp32)"
    assert (candidate["status"], candidate["build_time_s"]) == ("skipped", None)
    assert candidate["reason"] == f"not offered: {reason}"
    assert result.tuned == [] and reason in result.gains[0].reason and result.task_gate is None


def test_int8_on_a_bert_quantizes_every_linear_layer_and_is_judged_on_the_task():
    model, ids, encode = bert_encoder()
    strategy = named_strategy("first-wins", ["int8_dynamic"], precision="int8")
    config = LoopConfig(targets=("encoder",), strategy=strategy, precision="int8", **UNVERIFIED)
    linears = sum(isinstance(layer, nn.Linear) for layer in model.encoder.modules())

    result = optimize(model, ids, encode, config=config)

    candidate = result.tuning["modules"][0]["graphs"][0]["candidates"][0]
    assert candidate["status"] == "winner" and candidate["build_details"]["linear_layers"] == linears > 0
    assert result.task_gate.metric == "cosine" and result.task_gate.regions == ("encoder",)
    assert result.task_gate.passed == (result.task_gate.value >= 0.99)
    result.restore()


def test_an_eval_input_near_the_decision_boundary_reveals_what_the_recorded_input_hides():
    model = classifier_app.well_apart()
    boundary = classifier_app.near_the_boundary(classifier_app.BATCH)
    quantized = torch.ao.quantization.quantize_dynamic(copy.deepcopy(model), {nn.Linear}, dtype=torch.qint8)
    kept = int((quantized(boundary).argmax(-1) == model(boundary).argmax(-1)).sum())

    result = optimize(model, classifier_app.x, config=int8_loop(), eval_inputs=[boundary])

    gate = result.task_gate
    assert (gate.inputs, gate.passed) == (2, False)
    assert gate.value == pytest.approx((classifier_app.BATCH + kept) / (2 * classifier_app.BATCH)) and gate.value < 0.99
    assert f"top1_agreement {gate.value:.4f} >= 0.99 over 2 inputs: refused" in gate.line()
    assert result.tuned == [] and result.tuning["task_gate"]["inputs"] == 2
    alone = optimize(classifier_app.well_apart(), classifier_app.x, config=int8_loop())
    assert alone.task_gate.passed and alone.task_gate.inputs == 1  # the recorded input alone passes
    alone.restore()


def test_a_quality_bar_overrides_the_default_metric_and_value():
    model = classifier_app.near_tied()

    result = optimize(model, classifier_app.x, config=int8_loop(quality=parse_bar("cosine>=0.9")))

    assert result.task_gate.metric == "cosine" and result.task_gate.minimum == 0.9
    assert result.task_gate.passed  # the logits barely move: only their near-tied argmax does
    result.restore()


def test_the_default_never_changes_precision():
    model = classifier_app.well_apart()
    strategy = named_strategy("first-wins", ["int8_dynamic", "eager"])  # named, yet not offered at fp32

    result = optimize(model, classifier_app.x, config=LoopConfig(targets=("body",), strategy=strategy, **UNVERIFIED))

    assert LoopConfig().precision == "fp32" and MinLatencyStrategy().precision == "fp32"
    assert not any(backend.precision != "fp32" for backend in MinLatencyStrategy().backends)
    assert result.precision == "fp32" and result.task_gate is None and result.tuned == []
    assert all(parameter.dtype == torch.float32 for parameter in model.parameters())
    candidate = result.tuning["modules"][0]["graphs"][0]["candidates"][0]
    assert candidate["status"] == "skipped" and "pass --precision int8" in candidate["reason"]


def test_a_strategy_and_a_loop_asking_for_different_precisions_are_refused():
    strategy = named_strategy("first-wins", ["int8_dynamic"], precision="int8")

    with pytest.raises(TuningError, match="made for precision int8 but the loop asks for fp32"):
        optimize(classifier_app.well_apart(), classifier_app.x, config=LoopConfig(strategy=strategy, **UNVERIFIED))


@pytest.mark.skipif(BF16_REFUSED is not None, reason=f"bf16 is refused on this machine: {BF16_REFUSED}")
def test_bf16_passes_token_agreement_on_a_tiny_decoders_generate():
    model, ids, generate = llama_decoder()
    strategy = named_strategy("first-wins", ["bf16"], precision="bf16")
    config = LoopConfig(targets=("lm_head",), strategy=strategy, precision="bf16", **UNVERIFIED)

    result = optimize(model, ids, generate, config=config)

    assert result.task_gate.metric == "token_agreement" and result.task_gate.passed
    assert result.task_gate.first_divergence is None
    assert [region.path for region in result.tuned] == ["lm_head"]
    assert result.tuning["weight_memory"]["tuned_bytes"] * 2 == result.tuning["weight_memory"]["original_bytes"]
    result.restore()


@pytest.mark.skipif(BF16_REFUSED is None, reason="this machine runs bf16 fast: the refusal cannot happen here")
def test_bf16_on_a_machine_without_bf16_arithmetic_is_refused_with_the_reason():
    model, ids, generate = llama_decoder()
    config = LoopConfig(targets=("lm_head",), precision="bf16", **UNVERIFIED)

    with pytest.raises(TuningError, match="precision bf16 is refused on this machine: this CPU has no bfloat16"):
        optimize(model, ids, generate, config=config)

    assert not isinstance(model.lm_head, Module)


def test_int8_on_a_decoders_generate_is_judged_by_token_agreement():
    model, ids, generate = llama_decoder()
    strategy = named_strategy("first-wins", ["int8_dynamic"], precision="int8")
    config = LoopConfig(targets=("lm_head",), strategy=strategy, precision="int8", **UNVERIFIED)
    plain = generate(ids)

    result = optimize(model, ids, generate, config=config)

    gate = result.task_gate
    assert gate.metric == "token_agreement" and gate.minimum == 0.95
    assert gate.passed == (gate.value >= 0.95) and 0.0 <= gate.value <= 1.0
    assert (gate.first_divergence is None) == (gate.value == 1.0)
    assert torch.equal(generate(ids), plain) or gate.passed  # put back when refused: the fp32 tokens again
    result.restore()


def test_tune_precision_int8_prints_the_task_gate_beside_the_speedup_and_stores_it(tmp_path):
    app = f"{APPS / 'classifier_app.py'}:infer"

    ran = run_cli(
        "tune", app, "--input", "x", "--targets", "body", "--strategy", "first-wins", "--backends", "int8_dynamic",
        "--precision", "int8", "--warmup", "1", "--runs", "2", "--record", "1", "--no-verify", "--no-trace",
        "--out", str(tmp_path / "out"), check=True,
    )  # fmt: skip

    assert "task gate (int8): top1_agreement 0.5000 >= 0.99: refused, the regions run in fp32" in ran.stdout
    for name in ("tuning.json", "compare.json", "plan.json"):
        stored = json.loads((tmp_path / "out" / name).read_text())
        assert stored["precision"] == "int8" and stored["task_gate"]["metric"] == "top1_agreement", name


def test_tune_eval_inputs_are_judged_with_the_recorded_input_and_counted(tmp_path):
    app = f"{APPS / 'classifier_app.py'}:infer"

    ran = run_cli(
        "tune", app, "--input", "x", "--eval-inputs", "eval_inputs", "--targets", "body", "--strategy", "first-wins",
        "--backends", "int8_dynamic", "--precision", "int8", "--warmup", "1", "--runs", "2", "--record", "1",
        "--no-verify", "--no-trace", "--out", str(tmp_path / "out"), check=True,
    )  # fmt: skip

    assert "task gate (int8): top1_agreement 0.4792 >= 0.99 over 2 inputs: refused" in ran.stdout
    assert json.loads((tmp_path / "out" / "tuning.json").read_text())["task_gate"]["inputs"] == 2


def test_tune_an_evaluation_input_the_workload_rejects_is_one_sentence_naming_it(tmp_path):
    app = f"{APPS / 'classifier_app.py'}:infer"

    ran = run_cli(
        "tune", app, "--input", "x", "--eval-inputs", "wrong_width_inputs", "--targets", "body", "--strategy",
        "first-wins", "--backends", "int8_dynamic", "--precision", "int8", "--warmup", "1", "--runs", "2",
        "--record", "1", "--no-verify", "--no-trace", "--out", str(tmp_path / "out"),
    )  # fmt: skip

    assert ran.returncode == 2 and "Traceback" not in ran.stderr, ran.stderr[-3000:]
    error = ran.stderr.strip().splitlines()[-1]
    assert error.startswith("[error] the workload raised RuntimeError on eval_inputs[1], untuned, before the task gate")
    assert error.endswith("; make each evaluation input one the function takes, in the form of --input.")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("options", "sentence"),
    [
        (["--precision", "fp16"], "unknown precision 'fp16'; choose one of fp32, bf16, int8."),
        (["--precision", "int8", "--quality", "accuracy>=0.9"], "--quality 'accuracy>=0.9' is not METRIC>=VALUE"),
        (["--precision", "int8", "--quality", "psnr_db>=500"], "outside the metric's range 0..100"),
        (["--eval-inputs", "eval_inputs"], "--eval-inputs feeds the task gate, which judges a reduced precision"),
        (["--quality", "top1_agreement>=0.9"], "--quality sets the bar of the task gate, which judges a reduced"),
        (["--precision", "int8", "--eval-inputs", "x"], "--eval-inputs x holds a Tensor; it must be a non-empty list"),
    ],
)
def test_tune_refuses_a_bad_precision_or_quality_bar_in_one_sentence(options, sentence, tmp_path):
    ran = run_cli("tune", f"{APPS / 'classifier_app.py'}:infer", "--input", "x", *options, "--out", str(tmp_path / "o"))

    assert ran.returncode == 2 and sentence in ran.stderr + ran.stdout
    assert not (tmp_path / "o").exists()


def test_the_metric_follows_the_outputs_kind():
    logits = torch.tensor([[1.0, 2.0], [3.0, 0.0]])
    images = torch.rand(1, 3, 8, 8, generator=torch.Generator().manual_seed(0))

    assert output_metric(logits, logits.flip(-1))[:2] == ("top1_agreement", 0.0)
    assert output_metric({"logits": logits}, {"logits": logits})[:2] == ("top1_agreement", 1.0)
    assert output_metric(torch.tensor([[5, 6, 7]]), torch.tensor([[5, 9, 7]]))[:3] == ("token_agreement", 2 / 3, 1)
    assert output_metric(images, images)[:2] == ("psnr_db", 100.0)
    assert output_metric(torch.ones(1, 4, 8), -torch.ones(1, 4, 8))[:2] == ("cosine", pytest.approx(-1.0))
    assert output_metric("text", "text")[3].startswith("the workload returned a str")


def test_token_agreement_counts_a_shorter_generation_as_divergent_where_it_stops():
    assert token_agreement(torch.tensor([[1, 2, 3, 4]]), torch.tensor([[1, 2]])) == (0.5, 2)
    assert token_agreement(torch.tensor([[1, 2]]), torch.tensor([[1, 2]])) == (1.0, None)


def test_psnr_is_measured_over_the_references_range():
    reference = torch.zeros(1, 3, 4, 4)
    reference[..., 0] = 1.0

    assert psnr_db(reference, reference + 0.1) == pytest.approx(20.0)


def test_a_judgment_without_a_figure_never_passes():
    judgment = TaskJudgment("int8", "cosine", 0.99, None, ("body",), problem="the output holds non-finite values")

    assert not judgment.passed and "could not judge: the output holds non-finite values" in judgment.line()
