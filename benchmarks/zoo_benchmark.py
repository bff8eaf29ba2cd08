"""The loop on the model zoo: predicted against realised gain, the winner, correctness and whole-model torch.compile.

    PYTHONPATH=. .venv/bin/python benchmarks/zoo_benchmark.py [--models bert_classifier rnn_seq2seq]
        [--quick] [--no-compile] [--runs 10] [--repeats 15] [--threads N] [--json results.json]
        [--precision fp32|bf16|int8]

For each app of ``benchmarks/zoo`` (see ``zoo/__init__.py``) three copies are built with the same
seed: one stays eager, one goes through ``aitune.torch.optimize`` (capture, suggest, tune with the
default min-latency strategy, capture again), one has its inference function compiled whole with
``torch.compile`` (from an empty Inductor cache: a fresh ``TORCHINDUCTOR_CACHE_DIR`` per model).
Reported per model, in one table:

- predicted: suggest's end-to-end gain for what the loop kept tuned (the whole model's forecast when
  it tuned the whole model), from the gain model (``docs/gain-model.md``);
- realised: the loop's own verdict, before ÷ after run time with its 95% interval, and the
  interleaved eager ÷ tuned median of ``--repeats`` calls (drift hits both);
- predicted ÷ realised (interleaved): 1 is exact;
- the backend that won per tuned path; whether the tuned output equals eager's on the app's own
  output (leaf by leaf: integers exactly, floats within 1e-3); whether a second capture of the eager
  copy gives suggest's same top three targets;
- the loop's wall time, and torch.compile's speedup (interleaved) and build time (its first call);
- with ``--precision bf16`` or ``int8``, the loop tunes at that precision: the task gate's figure
  (``docs/tuning.md``, "Reduced precision") is the last column, and "correct" compares with eager's
  fp32 output, so it says DIFFERS wherever the reduced precision changed any number.

The machine's load average is printed before and after: the figures mean something on a quiet machine only.
``--quick`` (3 measured runs, 5 repeats) checks that the script works; it is no measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="aitune-zoo-"))

import torch
import torch.utils._pytree as pytree

from aitune.compare.verification import VerifyConfig
from aitune.errors import TuningError
from aitune.suggest import suggest
from aitune.torch import LoopConfig, apply_plan, optimize, profile, unwrap

sys.path.insert(0, str(Path(__file__).resolve().parent))
from zoo import APPS

TOLERANCE = 1e-3


def call(function: Callable[..., Any], input_data: Any) -> Any:
    """``function(input_data)`` by profile's convention: a mapping as keywords, a tuple as positional arguments,
    None as no arguments."""
    if input_data is None:
        return function()
    if isinstance(input_data, dict):
        return function(**input_data)
    if isinstance(input_data, tuple):
        return function(*input_data)
    return function(input_data)


def correctness(reference: Any, tuned: Any) -> str:
    """``equal``, ``within 1e-3 (max error e)`` or ``DIFFERS (…)``: leaf by leaf, integers exactly."""
    left, right = pytree.tree_leaves(reference), pytree.tree_leaves(tuned)
    if len(left) != len(right):
        return f"DIFFERS ({len(left)} against {len(right)} outputs)"
    worst = 0.0
    for one, other in zip(left, right, strict=True):
        if not isinstance(one, torch.Tensor) or not isinstance(other, torch.Tensor):
            if one != other:
                return "DIFFERS (a non-tensor output)"
            continue
        if one.shape != other.shape:
            return f"DIFFERS (shape {tuple(one.shape)} against {tuple(other.shape)})"
        if not one.is_floating_point():
            if not torch.equal(one, other):
                return "DIFFERS (integer outputs, e.g. tokens)"
            continue
        worst = max(worst, float((one.float() - other.float()).abs().max()) if one.numel() else 0.0)
    if worst == 0.0:
        return "equal"
    return f"within {TOLERANCE:g} (max error {worst:.1g})" if worst <= TOLERANCE else f"DIFFERS (max error {worst:.2g})"


def whole_cycle(entry: Callable[..., Any], input_data: Any, cycle: int) -> Callable[[], None]:
    """One timed repeat: ``cycle`` calls, so every side sees each of a rotating workload's calls once."""

    def run() -> None:
        for _ in range(cycle):
            call(entry, input_data)

    return run


def in_turns(calls: dict[str, Callable[[], Any]], repeats: int) -> dict[str, list[float]]:
    """Wall ms of each call per round, the calls timed in turns (one round after another) after one warmup each."""
    for function in calls.values():
        function()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, function in calls.items():
            start = time.perf_counter()
            function()
            times[name].append((time.perf_counter() - start) * 1000)
    return times


def interleaved(calls: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Median wall ms of each call, timed in turns after one warmup each."""
    return {name: statistics.median(values) for name, values in in_turns(calls, repeats).items()}


def top_three(doc: dict[str, Any]) -> list[str]:
    """The top three targets suggest recommends: the ones the loop would tune."""
    return [target.path for target in suggest(doc).recommended(3)]


def predicted(result: Any) -> float | None:
    """Suggest's end-to-end forecast for what the loop kept tuned."""
    if not result.suggestions:
        return None
    kept = [gain for gain in result.gains if gain.tuned]
    whole = [gain for gain in kept if not gain.path]  # the whole model, weighed or tuned by the decoder recipe
    if whole:
        return whole[0].predicted_speedup
    found = result.suggestions  # suggest's, each region priced for the backend that won it
    targets = {target.path: target for target in found.targets}
    picked = [targets[gain.path] for gain in kept if gain.path in targets]
    return found.combined(picked)[0] if picked else 1.0


class Counted:
    """An app's entry that counts its calls, so two copies of a rotating app are compared on the same call."""

    def __init__(self, entry: Callable[..., Any]) -> None:
        self.entry, self.calls = entry, 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.entry(*args, **kwargs)


def unseen(input_data: Any) -> Any:
    """An input the loop never saw, of the same kind: token ids three longer, floats drawn again; others as
    they are (a pipeline's keywords, a service that feeds itself)."""
    generator = torch.Generator().manual_seed(7)
    if isinstance(input_data, torch.Tensor) and not input_data.is_floating_point() and input_data.dim() == 2:
        high = int(input_data.max()) + 1
        return torch.randint(3, max(high, 4), (input_data.shape[0], input_data.shape[1] + 3), generator=generator)
    if isinstance(input_data, torch.Tensor) and input_data.is_floating_point():
        return torch.randn(input_data.shape, generator=generator, dtype=input_data.dtype)
    return input_data


def replayed(build: Callable[[], Any], plan: dict[str, Any]) -> str:
    """The plan applied to two fresh builds' tuned one, on an input it never saw, against the eager one: its
    correctness, or why it was refused."""
    if not plan["regions"]:
        return "empty plan"
    (eager, input_data, eager_function), (fresh, _, fresh_function) = build(), build()
    try:
        applied = apply_plan(fresh, plan)
    except TuningError as error:
        return f"REFUSED: {error}"
    try:
        other = unseen(input_data)
        with torch.no_grad():
            return correctness(call(eager_function or eager, other), call(fresh_function or fresh, other))
    finally:
        unwrap(fresh, list(applied.wrappers))


def whole_compile(build: Callable[[], Any]) -> tuple[Callable[[], Any] | None, float | None, str]:
    """A fresh copy's inference function under torch.compile, its first call's seconds, and a note."""
    obj, input_data, function = build()
    entry = function if function is not None else obj
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="aitune-zoo-compile-")
    torch._dynamo.reset()
    compiled = torch.compile(entry)
    start = time.perf_counter()
    try:
        call(compiled, input_data)
    except Exception as error:  # a model torch.compile cannot take is a result of its own
        return None, None, f"failed: {type(error).__name__}"
    return (lambda: call(compiled, input_data)), time.perf_counter() - start, "compiled"


def run(name: str, options: argparse.Namespace) -> dict[str, Any]:
    build = APPS[name].build
    eager, eager_input, eager_function = build()
    tuned, tuned_input, tuned_function = build()
    eager_entry = Counted(eager_function if eager_function is not None else eager)
    tuned_entry = Counted(tuned_function if tuned_function is not None else tuned)
    cycle = getattr(APPS[name], "CYCLE", 1)

    start = time.perf_counter()
    try:
        verify = VerifyConfig(cycle=cycle)  # a service's rotating calls: each side of a round runs a whole cycle
        config = LoopConfig(measured_runs=options.runs, precision=options.precision, verification=verify)
        result = optimize(tuned, tuned_input, tuned_entry, config=config)
    except TuningError as error:  # suggest found nothing worth tuning: the loop changed nothing, and says so
        result, refusal = None, str(error)
    loop_s = time.perf_counter() - start

    for _ in range((tuned_entry.calls - eager_entry.calls) % cycle):  # both copies at the same call of the cycle
        call(eager_entry, eager_input)
    with torch.no_grad():
        verdict = correctness(call(eager_entry, eager_input), call(tuned_entry, tuned_input))
    first = result.before if result is not None else capture(eager, eager_input, eager_entry, options.runs)
    second = capture(eager, eager_input, eager_entry, options.runs)
    if "gain_calibration" in first.get("environment", {}):  # the same figures, so only the capture differs
        second.setdefault("environment", {})["gain_calibration"] = first["environment"]["gain_calibration"]
    stable = top_three(first) == top_three(second)

    calls = {
        "eager": whole_cycle(eager_entry, eager_input, cycle),
        "tuned": whole_cycle(tuned_entry, tuned_input, cycle),
    }
    compiled, compile_s, compile_note = (None, None, "skipped") if options.no_compile else whole_compile(build)
    if compiled is not None:
        calls["compile"] = whole_cycle(compiled, None, cycle)
    with torch.no_grad():
        medians = interleaved(calls, options.repeats)
    if result is not None:
        figure_read, captures = result.end_to_end, result.comparison()["captures_speedup"]
        value, low, high = figure_read.value, figure_read.ci_low, figure_read.ci_high
        captured = captures["value"]
        result.restore()
        replay = replayed(build, result.plan)
    else:
        value, low, high, captured, replay = None, None, None, None, "no plan"
    tuned_paths = [gain for gain in result.gains if gain.tuned] if result is not None else []
    return {
        "model": name,
        "description": APPS[name].DESCRIPTION,
        "tuned": ", ".join(f"{gain.path or '(whole)'}→{gain.winner}" for gain in tuned_paths) or "none",
        "refusal": refusal if result is None else None,
        "not_tuned": not_tuned(result),
        "predicted": predicted(result) if result is not None else 1.0,
        "loop_speedup": value,  # what the loop prints: verified in alternating rounds; None when nothing stayed
        "loop_ci": (low, high),
        "capture_speedup": captured,  # the two captures' figure, for comparison
        "replay": replay,
        "realised": medians["eager"] / medians["tuned"],
        "correct": verdict,
        "top_three_stable": stable,
        "loop_s": loop_s,
        "compile_speedup": medians["eager"] / medians["compile"] if "compile" in medians else None,
        "compile_s": compile_s,
        "compile_note": compile_note,
        "medians_ms": medians,
        "calibration": calibration_source(first),
        "precision": options.precision,
        "task_gate": task_gate(result),
    }


def not_tuned(result: Any) -> dict[str, str]:
    """Why each region the loop tried was left as it was (its gain's note: the check that put it back, or the reason
    no backend won), by path."""
    gains = result.gains if result is not None else []
    return {gain.path or "(whole)": gain.note for gain in gains if not gain.tuned and gain.note}


def task_gate(result: Any) -> str:
    """The task gate's figure, ``token_agreement 1.0000 (>= 0.95)``; ``-`` at fp32 or where nothing was judged."""
    gate = result.task_gate if result is not None else None
    if gate is None:
        return "-"
    figure = "?" if gate.value is None else f"{gate.value:.4f}"
    return f"{gate.metric} {figure} (>= {gate.minimum:g}){'' if gate.passed else ' refused'}"


def capture(obj: Any, input_data: Any, function: Callable[..., Any], runs: int) -> dict[str, Any]:
    return profile(obj, input_data, function, warmup_runs=3, measured_runs=runs).data


def calibration_source(doc: dict[str, Any]) -> str:
    return suggest(doc).calibration.source


def figure(value: float | None, unit: str = "×") -> str:
    return "-" if value is None else f"{value:.2f}{unit}"


def load_line(when: str) -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {when}: {one:.2f} / {five:.2f} / {fifteen:.2f} (1/5/15 min) on {os.cpu_count()} cores"


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| model | the loop tuned (backend) | predicted | verified by the loop [95% interval] | the captures"
        " | realised, interleaved | predicted ÷ realised | correct | plan replayed on an unseen input | top 3 stable"
        " | loop wall s | torch.compile | compile build s | precision | task gate |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- | ---: | ---: | ---: | --- | --- |",
    ]
    for row in rows:
        low, high = row["loop_ci"]
        ratio = row["predicted"] / row["realised"] if row["predicted"] and row["realised"] else None
        compiled = figure(row["compile_speedup"]) if row["compile_speedup"] else row["compile_note"]
        lines.append(
            f"| {row['model']} | {row['tuned']} | {figure(row['predicted'])} | {figure(row['loop_speedup'])}"
            f" [{figure(low)}, {figure(high)}] | {figure(row['capture_speedup'])} | {figure(row['realised'])}"
            f" | {figure(ratio, '')} | {row['correct']} | {row['replay']}"
            f" | {'yes' if row['top_three_stable'] else 'NO'} | {row['loop_s']:.0f} | {compiled}"
            f" | {figure(row['compile_s'], '')} | {row['precision']} | {row['task_gate']} |"
        )
    return "\n".join(lines)


def summary(rows: list[dict[str, Any]]) -> str:
    """Median and worst factor between prediction and realised gain (the gain model's targets: ×1.25, ×1.5)."""
    factors = [
        max(row["predicted"] / row["realised"], row["realised"] / row["predicted"])
        for row in rows
        if row["predicted"] and row["realised"]
    ]
    if not factors:
        return "no model had a prediction to check"
    median, worst = statistics.median(factors), max(factors)
    return f"prediction off by ×{median:.2f} (median over {len(factors)} models), ×{worst:.2f} at worst"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(APPS), choices=list(APPS))
    parser.add_argument("--quick", action="store_true", help="3 measured runs, 5 repeats: checks the script works")
    parser.add_argument("--no-compile", action="store_true", help="leave whole-model torch.compile out")
    parser.add_argument("--runs", type=int, default=10, help="measured runs per capture")
    parser.add_argument("--repeats", type=int, default=15, help="interleaved timing repeats")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows to this file")
    parser.add_argument(
        "--precision", default="fp32", choices=["fp32", "bf16", "int8"], help="tune at this precision (task-gated)"
    )
    options = parser.parse_args()
    if options.quick:
        options.runs, options.repeats = 3, 5
    if options.threads is not None:
        torch.set_num_threads(options.threads)
    print(
        f"{platform.platform()}, {platform.processor() or platform.machine()}, torch {torch.__version__},"
        f" {torch.get_num_threads()} thread(s)"
    )
    print(load_line("at the start"))
    rows = []
    for name in options.models:
        rows.append(run(name, options))
        print(f"{name}: done ({rows[-1]['loop_s']:.0f} s in the loop)", flush=True)
    print(load_line("at the end"))
    print(f"gain model: {rows[0]['calibration'] if rows else '-'}")
    print()
    print(table(rows))
    print()
    print(summary(rows))
    for row in rows:
        if row["refusal"]:
            print(f"{row['model']}: nothing tuned: {row['refusal']}")
        for path, reason in row["not_tuned"].items():  # each candidate's reason: tuning.json has the rest
            print(f"{row['model']}: {path} not tuned: {reason}")
    if options.json is not None:
        options.json.write_text(json.dumps(rows, indent=2, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
