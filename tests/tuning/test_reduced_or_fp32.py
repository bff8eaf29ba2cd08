"""A reduced precision never ends worse than fp32: its backends compete with the fp32 ones under one gate.

With ``precision`` int8 (or bf16) the candidates are the level's backends and the fp32 defaults; the
fastest that passes the gate wins, the task gate judges a reduced winner, and a region whose reduced
winner the task gate refuses is tuned again among the fp32 backends. Every region says which precision
it ended at and why, in the terminal, in tuning.json and in plan.json; replaying the plan rebuilds each
region at its recorded precision.

Real modules and real backends: a region whose eager forward waits (`Waiting`) and an fp32 backend that
skips the wait, so the fp32 winner beats int8 by a margin no shared machine can hide; first-wins
strategies where a candidate must win by passing the gate alone.
"""

from __future__ import annotations

import json
import time
from typing import Any

import classifier_app
import pytest
import torch
from cli_helpers import APPS, run_cli
from torch import nn

from aitune.torch import LoopConfig, optimize
from aitune.torch.backends import Backend, BuildContext, Built, InductorBackend, Int8DynamicBackend, precision_backends
from aitune.torch.backends import default_backends as fp32_defaults
from aitune.torch.tuning.outcome import CandidateResult, GraphResult, RegionOutcome
from aitune.torch.tuning.paths import unwrap
from aitune.torch.tuning.plan_apply import apply_plan
from aitune.torch.tuning.plan_check import load_plan
from aitune.torch.tuning.precision_choice import PrecisionChoice, precision_choice
from aitune.torch.tuning.strategies import FirstWinsStrategy, MinLatencyStrategy

from .conftest import FAST_MEASURE

pytestmark = pytest.mark.slow

UNVERIFIED = {"warmup_runs": 1, "measured_runs": 2, "record_calls": 1, "verification": None}


class Waiting(nn.Module):
    """A tiny linear layer behind a 3 ms wait: int8 quantizes the layer and keeps the wait, so it cannot win."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.003)
        return self.linear(x)


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = Waiting()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class SkipWaitBackend(Backend):
    """The same fp32 math as `Waiting` without the wait: an fp32 build far faster than eager and than int8."""

    name = "skip_wait"

    def build(self, context: BuildContext) -> Built:
        linear = context.module.linear
        return Built(run=lambda x: linear(x))


def test_int8_asks_for_the_reduced_backends_and_the_fp32_ones():
    int8 = [(backend.name, backend.precision) for backend in precision_backends("int8")]
    bf16 = [backend.precision for backend in precision_backends("bf16")]
    fp32 = [(backend.name, backend.precision) for backend in fp32_defaults()]

    assert int8 == [("int8_dynamic", "int8"), *fp32]
    assert bf16[:3] == ["bf16"] * 3 and bf16[3:] == ["fp32"] * len(fp32)
    assert all(precision == "fp32" for _, precision in fp32)


def test_an_int8_run_keeps_the_fp32_winner_when_int8_is_slower_and_says_so():
    model, x = Model(), torch.randn(2, 8, generator=torch.Generator().manual_seed(0))
    strategy = MinLatencyStrategy([Int8DynamicBackend(), SkipWaitBackend()], precision="int8", measure=FAST_MEASURE)

    result = optimize(model, x, config=LoopConfig(targets=("body",), strategy=strategy, precision="int8", **UNVERIFIED))
    tuned = [(region.path, region.report.winner) for region in result.tuned]
    result.restore()  # before the assertions: a failed one must not leave the wrapper registered

    assert tuned == [("body", "skip_wait")]
    [choice] = result.precision_choices
    assert (choice.path, choice.precision) == ("body", "fp32")
    assert choice.why.startswith("int8_dynamic ") and choice.why.endswith("; kept skip_wait")
    assert "its largest linear layer is 8x4" in choice.why  # the measured loss, and what int8 pays for here
    int8 = result.tuning["modules"][0]["graphs"][0]["candidates"][0]
    assert int8["precision"] == "int8" and int8["status"] == "rejected"
    assert choice.why.startswith(f"int8_dynamic {int8['reason'][:-1]}")  # its own measured figure, then why
    assert result.tuning["modules"][0]["precision"] == "fp32"
    assert result.tuning["precision_choices"] == [choice.to_dict()]
    assert result.plan["precision"] == "int8" and result.plan["regions"][0]["precision"] == "fp32"
    assert result.task_gate is None  # nothing ran at int8, so there was nothing to judge on the task


def test_an_int8_winner_passes_the_same_gates_and_is_replayed_at_int8():
    model = classifier_app.well_apart()
    strategy = FirstWinsStrategy([Int8DynamicBackend(), InductorBackend()], precision="int8")

    result = optimize(model, classifier_app.x, config=LoopConfig(targets=("body",), strategy=strategy, precision="int8",
                                                                 **UNVERIFIED))  # fmt: skip

    assert result.task_gate.passed and [region.path for region in result.tuned] == ["body"]
    [choice] = result.precision_choices
    assert (choice.precision, choice.why.split(" ")[0]) == ("int8", "int8_dynamic")
    assert choice.why.endswith("over eager; the task gate passed")
    assert result.tuning["modules"][0]["precision"] == "int8"
    assert result.plan["regions"][0]["precision"] == "int8"
    result.restore()
    fresh = classifier_app.well_apart()
    applied = apply_plan(fresh, result.plan)
    assert [b["name"] for b in applied.wrappers["body"].to_dict()["tuned_backends"].values()] == ["int8_dynamic"]
    unwrap(fresh, list(applied.wrappers))


def test_a_plans_region_precision_is_read_from_its_backends_never_from_the_file():
    model = classifier_app.well_apart()
    strategy = FirstWinsStrategy([Int8DynamicBackend()], precision="int8")
    result = optimize(model, classifier_app.x, config=LoopConfig(targets=("body",), strategy=strategy, precision="int8",
                                                                 **UNVERIFIED))  # fmt: skip
    result.restore()
    claimed = json.loads(json.dumps(result.plan))
    claimed["regions"][0]["precision"] = "fp32"

    assert load_plan(claimed)["regions"][0]["precision"] == "int8"


def test_tune_int8_refused_on_the_task_tunes_the_region_again_at_fp32_and_prints_why(tmp_path):
    app = f"{APPS / 'classifier_app.py'}:infer"

    ran = run_cli(
        "tune", app, "--input", "x", "--targets", "body", "--strategy", "first-wins", "--backends",
        "int8_dynamic,onnxruntime", "--precision", "int8", "--warmup", "1", "--runs", "2", "--record", "1",
        "--no-verify", "--no-trace", "--out", str(tmp_path / "out"), check=True,
    )  # fmt: skip

    refused = "int8_dynamic put back by the task gate (int8): top1_agreement 0.5000 >= 0.99: refused"
    printed = " ".join(ran.stdout.split())  # the terminal wraps the long line
    assert f"precision body: fp32, {refused}, the regions run in fp32; tuned again at fp32: kept onnxruntime" in printed
    tuning = json.loads((tmp_path / "out" / "tuning.json").read_text())
    assert [(m["name"], m["precision"]) for m in tuning["modules"]] == [("body", "int8"), ("body", "fp32")]
    assert [m["graphs"][0]["winner"] for m in tuning["modules"]] == ["int8_dynamic", "onnxruntime"]
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert plan["precision"] == "int8" and [(r["path"], r["precision"]) for r in plan["regions"]] == [("body", "fp32")]
    fresh = classifier_app.near_tied()
    applied = apply_plan(fresh, plan)  # an fp32 region of a plan made at int8 is rebuilt in fp32
    assert [b["name"] for b in applied.wrappers["body"].to_dict()["tuned_backends"].values()] == ["onnxruntime"]
    assert torch.equal(fresh(classifier_app.x).argmax(-1), classifier_app.near_tied()(classifier_app.x).argmax(-1))
    unwrap(fresh, list(applied.wrappers))


def candidate(backend: str, precision: str, status: str, speedup: float | None, reason: str | None = None,
              details: dict[str, Any] | None = None) -> CandidateResult:  # fmt: skip
    return CandidateResult(
        backend, {}, precision, status, reason, 1.0, details, None, None, None, None, speedup,
        {"speedup": speedup} if speedup is not None else None, None, None, None,
    )  # fmt: skip


def region(*candidates: CandidateResult) -> RegionOutcome:
    winner = next((c.backend for c in candidates if c.won), "eager")
    return RegionOutcome("body", "aot_module:body", "Waiting", "cpu", (GraphResult("g", {}, 4, {}, 10.0, 0.01,
                                                                                   candidates, winner),))  # fmt: skip


INT8_DETAILS = {"largest_linear": "64x2", "int8_dot_products": None}


def test_a_lost_int8_candidate_is_named_with_both_figures_and_what_int8_pays_for_here():
    lost = candidate("int8_dynamic", "int8", "rejected", 1.1, "slower than inductor (1.10× vs 2.05× over eager)",
                     INT8_DETAILS)  # fmt: skip
    outcome = region(lost, candidate("inductor", "fp32", "winner", 2.05))

    choice = precision_choice("body", outcome, "inductor", None)

    assert choice == PrecisionChoice(
        "body",
        "fp32",
        "int8_dynamic slower than inductor (1.10× vs 2.05× over eager; its largest linear layer is 64x2, and this "
        "CPU has no one-step int8 dot product (VNNI, AMX)); kept inductor",
    )


def test_a_kept_int8_winner_names_the_fastest_fp32_rival_and_an_untried_region_has_no_choice():
    won = candidate("int8_dynamic", "int8", "winner", 2.4, None, INT8_DETAILS)
    outcome = region(won, candidate("inductor", "fp32", "rejected", 1.9, "slower than int8_dynamic"))

    choice = precision_choice("body", outcome, "int8_dynamic", None)

    assert (
        choice.line() == "body: int8, int8_dynamic 2.40× over eager, faster than inductor 1.90×; the task gate passed"
    )
    assert precision_choice("body", region(candidate("inductor", "fp32", "winner", 2.0)), "inductor", None) is None


def test_a_region_put_back_after_its_int8_win_says_by_what():
    won = candidate("int8_dynamic", "int8", "winner", 1.3, None, INT8_DETAILS)

    choice = precision_choice("body", region(won), "eager", "int8_dynamic put back: end to end 0.97× [0.90, 1.02]")

    assert choice == PrecisionChoice("body", "fp32", "int8_dynamic put back: end to end 0.97× [0.90, 1.02]")


def test_a_region_where_nothing_won_says_so_once():
    lost = candidate("int8_dynamic", "int8", "rejected", 0.65, "not 5% faster than eager (0.65×)", INT8_DETAILS)
    outcome = region(lost, candidate("inductor", "fp32", "rejected", 1.0, "not 5% faster than eager (1.00×)"))

    choice = precision_choice("body", outcome, "eager", "int8_dynamic: not 5% faster; inductor: not 5% faster")

    assert choice.why == (
        "int8_dynamic not 5% faster than eager (0.65×; its largest linear layer is 64x2, and this CPU has no one-step"
        " int8 dot product (VNNI, AMX)); no fp32 candidate won either; the region runs eager"
    )
