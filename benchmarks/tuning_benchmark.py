"""Tuning gain: tune each example's dominant module with min-latency, then time the whole model against eager.

    PYTHONPATH=. .venv/bin/python benchmarks/tuning_benchmark.py [--examples mlp conv encoder] [--repeats 15]

For each example an untouched copy runs eager; the tuned model and the copy are timed interleaved
(so machine drift hits both) and the speedup is the ratio of the medians, all in one process.
Correctness is the end-to-end max abs error and cosine similarity against the eager copy.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

import torch

import aitune.torch as ait
from aitune.torch.performance.environment import environment

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from tuning_models import EXAMPLES


def wall_ms(call) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1e3


def machine_line() -> str:
    env = environment()
    threads, system = env["torch_threads"], f"{env['os']} {env['machine']}"
    return f"torch {env['torch']} ({threads} threads), python {env['python']}, {system}"


def interleaved_medians(eager, tuned, repeats: int) -> tuple[float, float]:
    """Median wall time (ms) of each call, timed alternately after one warmup each."""
    eager(), tuned()
    eager_ms, tuned_ms = [], []
    for _ in range(repeats):
        eager_ms.append(wall_ms(eager))
        tuned_ms.append(wall_ms(tuned))
    return statistics.median(eager_ms), statistics.median(tuned_ms)


def run_example(name: str, repeats: int, report_dir: Path) -> dict:
    model, example, path = EXAMPLES[name]()
    reference_model = copy.deepcopy(model)
    wrappers = ait.wrap(model, path)
    try:
        start = time.perf_counter()
        report = ait.tune(model, [example], report_file=report_dir / f"tuning_{name}.json")
        tuning_s = time.perf_counter() - start
        with torch.no_grad():
            expected, actual = reference_model(example), model(example)
            eager_ms, tuned_ms = interleaved_medians(lambda: reference_model(example), lambda: model(example), repeats)
        graph = report["modules"][0]["graphs"][0]
        error = float((actual - expected).abs().max())
        cosine = float(torch.nn.functional.cosine_similarity(actual.flatten(), expected.flatten(), dim=0))
    finally:
        ait.unwrap(model, list(wrappers))
    builds = {c["backend"]: c["build_time_s"] for c in graph["candidates"] if c["build_time_s"] is not None}
    return {
        "example": name,
        "module": path,
        "winner": graph["winner"],
        "eager_ms": eager_ms,
        "tuned_ms": tuned_ms,
        "speedup": eager_ms / tuned_ms,
        "max_abs_error": error,
        "cosine": cosine,
        "builds": builds,
        "tuning_s": tuning_s,
        "candidates": [(c["backend"], c["status"], c["speedup_vs_eager"], c["reason"]) for c in graph["candidates"]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", nargs="+", default=list(EXAMPLES), choices=list(EXAMPLES))
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--report-dir", type=Path, default=Path("benchmarks/out"))
    options = parser.parse_args()
    print(machine_line())
    rows = [run_example(name, options.repeats, options.report_dir) for name in options.examples]
    print("\n| example | tuned module | winner | eager ms | tuned ms | speedup | max abs error | cosine | build s |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for row in rows:
        builds = ", ".join(f"{backend} {seconds:.1f}" for backend, seconds in row["builds"].items())
        print(
            f"| {row['example']} | `{row['module']}` | {row['winner']} | {row['eager_ms']:.1f} | {row['tuned_ms']:.1f}"
            f" | {row['speedup']:.2f}× | {row['max_abs_error']:.1e} | {row['cosine']:.6f} | {builds} |"
        )
    for row in rows:
        print(f"\n{row['example']} candidates (tuning took {row['tuning_s']:.0f} s):")
        for backend, status, speedup, reason in row["candidates"]:
            figure = f"{speedup:.2f}×" if speedup is not None else "-"
            print(f"  {backend:12} {status:9} {figure:>7}  {reason or ''}")


if __name__ == "__main__":
    main()
