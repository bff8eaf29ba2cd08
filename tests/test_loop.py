"""The tune loop: capture → suggest → wrap and tune → capture → compare, and plans applied in a fresh process.

Real tuning on a small pipeline (`tests/apps/loop_app.py`) with ONNX Runtime under first-wins, so a
candidate wins by passing the gate, not by a timing on a shared machine.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import time

import loop_app
import pytest
import torch
from cli_helpers import APPS, ROOT, run_cli
from rich.console import Console
from torch import nn
from tuning.conftest import FAST_MEASURE, SlowLinear

import aitune.torch.jit as jit
from aitune.cli.loop import end_to_end_lines, loop_view, verification_lines
from aitune.compare.verification import VerifyConfig
from aitune.report.formatting import factor
from aitune.torch import LoopConfig, optimize
from aitune.torch.backends import BACKENDS, Backend, BuildContext, Built
from aitune.torch.tuning.strategies import OneBackendStrategy, named_strategy
from aitune.torch.tuning.verify import Switch, verify_tuned
from aitune.torch.tuning.wrapper import Module

pytestmark = pytest.mark.slow

ORT_FIRST_WINS = named_strategy("first-wins", ["onnxruntime"])
FAST = {"warmup_runs": 1, "measured_runs": 3, "record_calls": 1}
UNVERIFIED = {
    **FAST,
    "verification": None,
}  # the loop's mechanics; verification is tested with backends slow on purpose


def seeded(call, *args):
    torch.manual_seed(0)  # the noisy module draws the same noise on both sides
    return call(*args)


@pytest.fixture
def pipe():
    yield loop_app.build()
    jit.reset()  # JIT registration takes one batch per process; the next test registers its own


@pytest.mark.parametrize("mode", ["aot", "jit"])
def test_the_loop_tunes_the_chosen_paths_and_the_after_profile_shows_them_managed(pipe, mode):
    plain = seeded(pipe, loop_app.x)
    config = LoopConfig(targets=("encoder", "head"), mode=mode, strategy=ORT_FIRST_WINS, **UNVERIFIED)

    result = optimize(pipe, loop_app.x, config=config)
    try:
        tuned = seeded(pipe, loop_app.x)
        states = {region["id"]: region.get("wrapper_state") for region in result.after["regions"]}
    finally:
        result.restore()

    kind = f"{mode}_module"
    assert states[f"{kind}:encoder"] == "tuned" and states[f"{kind}:head"] == "tuned"
    assert [(gain.path, gain.winner) for gain in result.gains] == [("encoder", "onnxruntime"), ("head", "onnxruntime")]
    assert all(gain.realised_region_speedup is not None for gain in result.gains)
    assert torch.allclose(tuned, plain, rtol=1e-3, atol=1e-4)
    assert [region["path"] for region in result.plan["regions"]] == ["encoder", "head"]
    assert {region["mode"] for region in result.plan["regions"]} == {mode}


def test_a_region_no_backend_can_match_is_left_as_it_was_with_the_reason(pipe):
    config = LoopConfig(targets=("noisy",), strategy=ORT_FIRST_WINS, **UNVERIFIED)

    result = optimize(pipe, loop_app.x, config=config)

    (gain,) = result.gains
    assert gain.winner == "eager" and "onnxruntime" in gain.reason
    assert "untuned_module:noisy" in {region["id"] for region in result.after["regions"]}
    assert result.plan["regions"] == [] and result.tuned == []
    assert type(pipe.noisy).__name__ == "Noisy"  # the wrapper is gone again


def test_restore_puts_every_original_module_back(pipe):
    before = {name: type(getattr(pipe, name)) for name in ("encoder", "head")}
    config = LoopConfig(targets=("encoder", "head"), strategy=ORT_FIRST_WINS, **UNVERIFIED)

    optimize(pipe, loop_app.x, config=config).restore()

    assert {name: type(getattr(pipe, name)) for name in before} == before


APPLY_IN_FRESH_PROCESS = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
import aitune.torch.jit as jit
import loop_app
from aitune.torch.backends import InductorBackend
from aitune.torch.tuning.plan_apply import apply_plan

def never_built(self, context):
    raise AssertionError("apply_plan built a backend the plan did not choose")

InductorBackend.build = never_built
pipe = loop_app.build()
torch.manual_seed(0)
plain = pipe(loop_app.x)
applied = apply_plan(pipe, sys.argv[2])
torch.manual_seed(0)
tuned = pipe(loop_app.x)
print(json.dumps({
    "close": bool(torch.allclose(tuned, plain, rtol=1e-3, atol=1e-4)),
    "states": {path: wrapper.state.value for path, wrapper in applied.wrappers.items()},
    "backends": {path: sorted({b["name"] for b in w.to_dict()["tuned_backends"].values()})
                 for path, w in applied.wrappers.items()},
}))
"""


def test_a_plan_applied_in_a_fresh_process_builds_only_the_chosen_backends(pipe, tmp_path):
    config = LoopConfig(targets=("encoder", "head"), strategy=ORT_FIRST_WINS, **UNVERIFIED)
    result = optimize(pipe, loop_app.x, config=config)
    result.restore()
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(result.plan))

    run = subprocess.run(
        [sys.executable, "-c", APPLY_IN_FRESH_PROCESS, str(APPS), str(plan)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=True,
    )

    outcome = json.loads(run.stdout.strip().splitlines()[-1])
    assert outcome == {
        "close": True,
        "states": {"encoder": "tuned", "head": "tuned"},
        "backends": {"encoder": ["onnxruntime"], "head": ["onnxruntime"]},
    }


def test_tune_writes_both_captures_the_reports_and_the_plan_into_one_folder(tmp_path):
    out = tmp_path / "tuned"
    target = f"{APPS / 'loop_app.py'}:infer"
    options = [
        "--input",
        "x",
        "--warmup",
        "1",
        "--runs",
        "3",
        "--record",
        "1",
        "--strategy",
        "first-wins",
        "--no-verify",
    ]

    result = run_cli(
        "tune",
        target,
        *options,
        "--targets",
        "encoder",
        "--backends",
        "onnxruntime",
        "--out",
        str(out),
        "--json",
        check=True,
    )

    listing = json.loads(result.stdout)
    files = {path.relative_to(out).as_posix() for path in out.rglob("*") if path.is_file()}
    assert files == {
        "before/profile.json",
        "before/profile.md",
        "before/trace.json.gz",
        "after/profile.json",
        "after/profile.md",
        "after/trace.json.gz",
        "suggestions.json",
        "tuning.json",
        "compare.json",
        "plan.json",
    }
    assert listing["comparison"]["tuned_regions"][0]["path"] == "encoder"
    assert listing["comparison"]["tuned_regions"][0]["winner"] == "onnxruntime"
    again = run_cli("tune", target, *options, "--plan", str(out / "plan.json"), "--out", str(tmp_path / "replayed"))
    assert again.returncode == 0, again.stderr
    assert "encoder" in again.stdout and "onnxruntime" in again.stdout


@pytest.mark.parametrize(
    ("options", "sentence"),
    [
        (["--mode", "fast"], "unknown --mode 'fast'; choose aot or jit."),
        (["--strategy", "fastest"], "unknown strategy 'fastest'; choose one of min-latency, first-wins."),
        (["--backends", "tvm"], "unknown backend 'tvm'"),
        (["--tolerance", "tight"], "--tolerance takes RTOL or RTOL,ATOL as numbers"),
        (["--targets", "nosuch"], "nothing at 'nosuch'"),
        (["--cycle", "0"], "--cycle takes the number of calls after which the workload repeats, 1 to 64 (got 0)."),
        (["--cycle", "65"], "--cycle takes the number of calls after which the workload repeats, 1 to 64 (got 65)."),
    ],
)
def test_tune_refuses_bad_options_with_one_sentence(options, sentence):
    result = run_cli("tune", f"{APPS / 'loop_app.py'}:infer", "--input", "x", "--warmup", "0", "--runs", "1", *options)

    assert result.returncode == 2
    assert sentence in result.stderr and "Traceback" not in result.stderr


def test_a_model_whose_parts_suggest_ranks_is_tuned_whole_when_that_is_predicted_no_worse():
    model = loop_app.TwoStage()

    result = optimize(model, loop_app.x, config=LoopConfig(strategy=ORT_FIRST_WINS, **UNVERIFIED))
    try:
        regions = {region["id"]: region.get("wrapper_state") for region in result.after["regions"]}
    finally:
        result.restore()

    assert result.whole_model is not None and result.whole_model.chosen
    assert set(result.whole_model.separate_paths) == {"first", "second"}
    assert [(gain.path, gain.winner) for gain in result.gains] == [("", "onnxruntime")]
    assert regions == {"aot_module:TwoStage": "tuned"}
    assert result.plan["regions"][0]["path"] == "" and result.plan["regions"][0]["module_type"] == "loop_app.TwoStage"
    assert "forward" not in vars(model)  # restored


def test_when_the_whole_model_fails_the_gate_its_parts_are_tuned_instead():
    model = loop_app.TwoStage(noisy=True)

    result = optimize(model, loop_app.x, config=LoopConfig(strategy=ORT_FIRST_WINS, **UNVERIFIED))
    result.restore()

    outcomes = {gain.path: gain.winner for gain in result.gains}
    assert outcomes == {"": "eager", "first": "onnxruntime", "second": "onnxruntime"}
    assert sorted(region["path"] for region in result.plan["regions"]) == ["first", "second"]  # ranked by share


def test_on_the_bundled_pipeline_suggest_picks_the_unet_and_the_loop_tunes_it():
    import pipeline_app

    pipe = pipeline_app.Pipeline()
    plain = pipe(**pipeline_app.input_data)

    result = optimize(pipe, pipeline_app.input_data, config=LoopConfig(top=1, strategy=ORT_FIRST_WINS, **UNVERIFIED))
    try:
        tuned = pipe(**pipeline_app.input_data)
        states = {region["id"]: region.get("wrapper_state") for region in result.after["regions"]}
    finally:
        result.restore()

    assert result.suggestions.recommended()[0].path == "unet"
    assert [(gain.path, gain.winner) for gain in result.gains] == [("unet", "onnxruntime")]
    assert states["aot_module:unet"] == "tuned"
    assert (tuned - plain).abs().max() <= 1.0  # a 0–255 image: rounding may flip a level where eager sits on .5


class SkipOrStall(Backend):
    """Correct everywhere; skips a `SlowLinear`'s wait (a real win) and waits 1 ms before any other module (a loss)."""

    name = "skip_or_stall"

    def build(self, context: BuildContext) -> Built:
        module, forward = context.module, context.forward
        if isinstance(module, SlowLinear):
            return Built(run=lambda x: torch.nn.functional.linear(x, module.weight, module.bias))

        def stalled(*args, **kwargs):
            time.sleep(0.001)
            return forward(*args, **kwargs)

        return Built(run=stalled)


class WinAndLoss:
    """``fast``: eager waits 3 ms, the backend does not; ``plain``: a tiny linear the backend makes 1 ms slower.

    Sleeps overshoot on a loaded machine, so the win is three times the loss: with both tuned, the
    run without ``fast`` still takes four times as long.
    """

    def __init__(self) -> None:
        torch.manual_seed(0)
        self.fast = SlowLinear(0.003)
        self.plain = nn.Linear(4, 4).eval()

    @torch.no_grad()
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.plain(self.fast(x))


X8 = torch.randn(2, 8, generator=torch.Generator().manual_seed(0))
SKIP_OR_STALL = OneBackendStrategy(SkipOrStall(), measure=FAST_MEASURE)


@pytest.fixture
def win_and_loss():
    yield WinAndLoss()
    jit.reset()


@pytest.mark.parametrize("mode", ["aot", "jit"])
def test_a_region_that_slows_the_run_is_put_back_left_out_of_the_plan_and_untuned_after(win_and_loss, mode):
    config = LoopConfig(targets=("plain",), mode=mode, strategy=SKIP_OR_STALL, **FAST)

    result = optimize(win_and_loss, X8, config=config)
    result.restore()

    (gain,) = result.gains
    assert (gain.winner, gain.tuned, gain.check.kept) == ("skip_or_stall", False, False)
    assert gain.check.speedup.median < 1
    assert result.plan["regions"] == [] and result.tuned == []
    assert result.tuning["verification"]["regions"][0]["path"] == "plain"
    assert "untuned_module:plain" in {region["id"] for region in result.after["regions"]}
    assert isinstance(win_and_loss.plain, nn.Linear) and "forward" not in vars(win_and_loss.plain)
    (line,) = verification_lines(result)
    assert line.startswith("plain: skip_or_stall put back: end to end 0.")
    assert result.comparison()["verification"]["regions"][0]["kept"] is False
    assert result.comparison()["speedup"] == {
        "value": None, "ci_low": None, "ci_high": None, "source": "nothing tuned", "rounds": None
    }  # fmt: skip
    assert end_to_end_lines(result)[0] == (
        "end to end: nothing stayed tuned, so the model runs as before (no speedup is claimed)"
    )


def test_of_a_win_and_a_loss_only_the_win_stays_tuned_and_goes_into_the_plan(win_and_loss):
    config = LoopConfig(targets=("fast", "plain"), strategy=SKIP_OR_STALL, **FAST)

    result = optimize(win_and_loss, X8, config=config)
    try:
        states = {region["id"]: region.get("wrapper_state") for region in result.after["regions"]}
    finally:
        result.restore()

    assert {gain.path: gain.tuned for gain in result.gains} == {"fast": True, "plain": False}
    assert [region["path"] for region in result.plan["regions"]] == ["fast"]
    assert states == {"aot_module:fast": "tuned", "untuned_module:plain": None}
    assert result.verification.end_to_end.ci_low > 1
    shown = Console(width=300, record=True, file=io.StringIO())
    shown.print(loop_view(result))
    assert "plain: skip_or_stall put back: its contribution 0." in shown.export_text()
    assert [line.split(":")[0] for line in verification_lines(result)] == ["plain"]
    verified = result.verification.end_to_end
    assert (result.end_to_end.source, result.end_to_end.value) == ("verified", verified.median)
    figure = factor(verified.median, verified.ci_low, verified.ci_high)
    assert end_to_end_lines(result)[0] == (
        f"end to end: {figure} faster, verified over {verified.rounds} alternating eager/tuned rounds in one process"
    )
    assert end_to_end_lines(result)[1].startswith("the captures: ")
    assert result.comparison()["speedup"]["value"] == verified.median


class SkipUntilCaptured(Backend):
    """Skips a `SlowLinear`'s wait through the trials and the end-to-end check, then stalls 20 ms a call
    once ``stalling`` is set: a tuning that passed every check but is slower in the capture after it."""

    name = "skip_until_captured"

    def __init__(self) -> None:
        self.stalling = False

    def build(self, context: BuildContext) -> Built:
        module = context.module

        def run(x):
            if self.stalling:
                time.sleep(0.02)
            return torch.nn.functional.linear(x, module.weight, module.bias)

        return Built(run=run)


def test_a_tuning_the_after_capture_shows_slower_is_put_back_whole_and_captured_again(win_and_loss):
    backend = SkipUntilCaptured()
    phases = []

    def on_phase(name, _calls):
        phases.append(name)
        backend.stalling = backend.stalling or name == "capture after"
        return lambda: None

    strategy = OneBackendStrategy(backend, measure=FAST_MEASURE)
    config = LoopConfig(targets=("fast",), strategy=strategy, **{**FAST, "measured_runs": 6})
    result = optimize(win_and_loss, X8, config=config, on_phase=on_phase)
    result.restore()

    (gain,) = result.gains
    assert (gain.winner, gain.tuned, gain.check.kept, gain.check.compared) == (
        "skip_until_captured",
        False,
        False,
        "the captures",
    )
    assert gain.check.speedup.ci_high < 1
    assert phases[-1] == "capture after, everything put back"
    assert result.tuned == [] and result.plan["regions"] == []
    assert "untuned_module:fast" in {region["id"] for region in result.after["regions"]}
    assert isinstance(win_and_loss.fast, SlowLinear) and "forward" not in vars(win_and_loss.fast)
    (line, *_) = verification_lines(result)
    assert line.startswith("fast: skip_until_captured put back: the captures 0.")


class StallUnderAShippedName(SkipOrStall):
    """`SkipOrStall` under ONNX Runtime's name and config: a plan may only name the backends aitune ships."""

    name = "onnxruntime"

    def __init__(self, intra_op_threads: int = 1) -> None:
        self.intra_op_threads = intra_op_threads

    def config(self) -> dict:
        return {"intra_op_threads": self.intra_op_threads}


def test_a_replayed_plan_that_loses_here_is_put_back(win_and_loss, monkeypatch):
    monkeypatch.setitem(BACKENDS, StallUnderAShippedName.name, StallUnderAShippedName)
    strategy = OneBackendStrategy(StallUnderAShippedName(), measure=FAST_MEASURE)
    unverified = LoopConfig(targets=("fast", "plain"), strategy=strategy, **UNVERIFIED)
    made = optimize(win_and_loss, X8, config=unverified)  # both kept: a plan holding a loss, as older versions wrote
    made.restore()
    assert [region["path"] for region in made.plan["regions"]] == ["fast", "plain"]

    replayed = optimize(WinAndLoss(), X8, config=LoopConfig(**FAST), plan=made.plan)
    replayed.restore()

    assert {gain.path: gain.tuned for gain in replayed.gains} == {"fast": True, "plain": False}
    assert [region["path"] for region in replayed.plan["regions"]] == ["fast"]
    assert "untuned_module:plain" in {region["id"] for region in replayed.after["regions"]}


def test_a_tuned_wrapper_runs_its_original_forward_inside_original_forward_and_tuned_after():
    module = SlowLinear(0.0)
    wrapper = Module(module, name="slow", strategy=SKIP_OR_STALL)
    try:
        wrapper(X8)
        wrapper.tune()

        with wrapper.original_forward():
            inside = vars(module).get("forward")
            original = wrapper(X8)
        tuned = wrapper(X8)
        after = vars(module).get("forward")
    finally:
        wrapper.close()

    assert inside is None  # the class's own forward, exactly as if unwrapped
    assert isinstance(after.__self__, Module)  # the dispatch again
    assert wrapper.state.value == "passthrough" and "forward" not in vars(module)
    assert torch.allclose(original, tuned)


class Translator(nn.Module):
    """Its entry method calls the children; its own forward never runs (as a hand-written seq2seq's ``translate``)."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Linear(8, 8)
        self.decoder = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise AssertionError("translate never calls forward")

    def translate(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x))


def test_a_root_whose_forward_never_runs_is_not_tuned_whole_and_its_parts_are():
    from aitune.torch.loop.config import silent
    from aitune.torch.loop.search import tune_whole_first
    from aitune.torch.loop.ways import tune_aot

    model = Translator().eval()
    config = LoopConfig(strategy=SKIP_OR_STALL, **UNVERIFIED)

    paths = ["encoder", "decoder"]
    tuning = tune_whole_first(model, model.translate, X8, paths, config, silent, tune_aot, lambda tuned: tuned)
    tuning.undo()

    assert "never reached" in tuning.outcomes[""][1]
    assert {"encoder", "decoder"} <= set(tuning.outcomes)
    assert not isinstance(model.encoder, Module) and not isinstance(model.decoder, Module)


class RotatingService:
    """A service's workload: each call feeds a real linear layer the next length of a rotation, as a QA
    endpoint sees questions of different lengths; it notes, per call, the length and whether the region ran
    its original code."""

    LENGTHS = (4, 32, 8)

    def __init__(self) -> None:
        torch.manual_seed(0)
        self.layer, self.calls, self.eager = nn.Linear(8, 8).eval(), 0, False
        self.seen: list[tuple[bool, int]] = []

    def __call__(self) -> torch.Tensor:
        length = self.LENGTHS[self.calls % len(self.LENGTHS)]
        self.calls += 1
        self.seen.append((self.eager, length))
        with torch.no_grad():
            return self.layer(torch.ones(length, 8))

    @contextlib.contextmanager
    def original(self):
        self.eager = True
        try:
            yield
        finally:
            self.eager = False


def test_with_a_cycle_eager_and_tuned_runs_see_the_same_calls_of_a_rotating_workload():
    service = RotatingService()
    switch = Switch(service.original, lambda: None)
    cycle = len(RotatingService.LENGTHS)

    verify_tuned(service, None, {"layer": switch}, VerifyConfig(min_rounds=3, max_rounds=3, cycle=cycle))

    measures = [service.seen[start : start + cycle] for start in range(0, len(service.seen), cycle)]
    assert len(measures) == 2 + 2 * 3  # a warm cycle of each side, then three rounds of both
    assert {tuple(length for _, length in calls) for calls in measures} == {RotatingService.LENGTHS}
    assert [calls[0][0] for calls in measures] == [True, False, True, False, False, True, True, False]
    assert all(len({eager for eager, _ in calls}) == 1 for calls in measures)  # a cycle runs one side only
