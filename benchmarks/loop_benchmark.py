"""The tune loop against whole-model torch.compile, per bundled example, in one process.

    PYTHONPATH=. .venv/bin/python benchmarks/loop_benchmark.py [--examples pipeline decoder] [--repeats 15]
        [--threads N] [--runs 10]

For each example three copies are built with the same seed (so the same weights): one stays eager,
one goes through `aitune.torch.optimize` (capture, suggest, tune with the default min-latency
strategy, capture again), one is compiled whole with ``torch.compile`` (the entry call itself: the
pipeline's ``__call__`` or the decoder's ``generate``). Then the three are timed interleaved, medians
of ``--repeats``, so machine drift hits all of them. Reported per example: what the loop tuned,
suggest's predicted end-to-end gain (for the top target alone and for everything tuned), the
realised gain (eager ÷ tuned), the prediction error (predicted ÷ realised), the loop's build time
(every candidate's, from its tuning report) and wall time (captures and recording included), and
torch.compile's speedup and build time (its first call).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Build times are the point: start with an empty Inductor cache, or a second run compiles in seconds.
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="aitune-loop-benchmark-"))

import torch
from tuning_benchmark import machine_line, wall_ms

from aitune.torch import LoopConfig, optimize

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import decoder_app
import pipeline_app


def pipeline() -> tuple[Any, Callable[[Any], Callable[..., Any]], dict[str, Any]]:
    """A fresh pipeline, its entry call (the pipeline itself) and its input."""
    return pipeline_app.Pipeline(), lambda pipe: pipe, pipeline_app.input_data


def decoder() -> tuple[Any, Callable[[Any], Callable[..., Any]], dict[str, Any]]:
    """A fresh decoder (seeded: the same weights every time), its entry call (``generate``) and its input."""
    torch.manual_seed(0)
    return decoder_app.TinyLM().eval(), lambda model: model.generate, decoder_app.input_data


EXAMPLES = {"pipeline": pipeline, "decoder": decoder}


def interleaved(calls: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Median wall ms of each call, timed in turns after one warmup each."""
    for call in calls.values():
        call()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            times[name].append(wall_ms(call))
    return {name: statistics.median(values) for name, values in times.items()}


def run(name: str, repeats: int, runs: int) -> dict[str, Any]:
    build = EXAMPLES[name]
    (eager, entry, input_data), (tuned, _, _), (whole, _, _) = build(), build(), build()

    start = time.perf_counter()
    result = optimize(tuned, input_data, entry(tuned), config=LoopConfig(measured_runs=runs))
    loop_s = time.perf_counter() - start

    compiled_entry = torch.compile(entry(whole))
    start = time.perf_counter()
    compiled_entry(**input_data)
    compile_s = time.perf_counter() - start

    def call(model: Any) -> Any:
        return entry(model)(**input_data)

    with torch.no_grad():
        reference = call(eager)
        error = float((call(tuned).float() - reference.float()).abs().max())
    compiled = {
        "eager": lambda: call(eager),
        "loop": lambda: call(tuned),
        "compile": lambda: compiled_entry(**input_data),
    }
    medians = interleaved(compiled, repeats)
    targets = {target.path: target for target in result.suggestions.targets}
    tuned_targets = [targets[gain.path] for gain in result.gains if gain.tuned and gain.path in targets]
    top = result.gains[0] if result.gains else None
    realised = medians["eager"] / medians["loop"]
    whole_tuned = any(gain.tuned and not gain.path for gain in result.gains)
    predicted_all = (
        result.whole_model.predicted_speedup if whole_tuned else result.suggestions.combined(tuned_targets)[0]
    )
    return {
        "example": name,
        "tuned": ", ".join(f"{gain.path or '(whole model)'}→{gain.winner}" for gain in result.gains),
        "whole_model": result.whole_model.reason if result.whole_model else "not considered",
        "predicted_top": top.predicted_speedup if top else None,
        "predicted_all": predicted_all,
        "realised": realised,
        "error": error,
        "loop_s": loop_s,
        "build_s": sum(
            candidate["build_time_s"] or 0.0
            for module in (result.tuning or {}).get("modules", ())
            for graph in module["graphs"]
            for candidate in graph["candidates"]
        ),
        "compile_speedup": medians["eager"] / medians["compile"],
        "compile_s": compile_s,
        "medians": medians,
    }


def figure(value: float | None, unit: str = "×") -> str:
    return "-" if value is None else f"{value:.2f}{unit}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", nargs="+", default=list(EXAMPLES), choices=list(EXAMPLES))
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--runs", type=int, default=10, help="measured runs per capture")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    options = parser.parse_args()
    if options.threads is not None:
        torch.set_num_threads(options.threads)
    print(machine_line())
    rows = [run(name, options.repeats, options.runs) for name in options.examples]
    print(
        "\n| example | the loop tuned | predicted (top target) | predicted (all tuned) | realised"
        " | predicted ÷ realised | loop builds s | loop wall s | torch.compile speedup | compile s | max abs error |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        ratio = row["predicted_all"] / row["realised"] if row["predicted_all"] else None
        print(
            f"| {row['example']} | {row['tuned']} | {figure(row['predicted_top'])} | {figure(row['predicted_all'])}"
            f" | {figure(row['realised'])} | {figure(ratio, '')} | {row['build_s']:.0f} | {row['loop_s']:.0f} |"
            f" {figure(row['compile_speedup'])} | {row['compile_s']:.0f} | {row['error']:.2g} |"
        )
    for row in rows:
        times = ", ".join(f"{name} {ms:.1f} ms" for name, ms in row["medians"].items())
        print(f"{row['example']}: {times}; whole model: {row['whole_model']}")


if __name__ == "__main__":
    main()
