"""JIT tuning gain: build the bundled pipeline under JIT interception, let it tune itself, time it against eager.

    PYTHONPATH=. .venv/bin/python benchmarks/jit_benchmark.py [--repeats 15] [--tune-after 2] [--threads N]

An untouched pipeline (same seed, same weights) runs eager; the JIT pipeline runs ``tune_after``
calls to record and tune top down with the default min-latency strategy, then both are timed
interleaved (so machine drift hits both) and the speedup is the ratio of the medians, in one process.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from tuning_benchmark import interleaved_medians, machine_line

from aitune.torch import jit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from pipeline_app import Pipeline, input_data


def candidate_line(report: dict) -> str:
    """``name: backend status speedup, …`` over the module's graphs."""
    candidates = [c for graph in report["graphs"] for c in graph["candidates"]]
    figures = [f"{c['backend']} {c['status']} {c['speedup_vs_eager'] or '-'}×" for c in candidates]
    return f"  {report['name']}: {', '.join(figures)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--tune-after", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    options = parser.parse_args()
    if options.threads is not None:
        torch.set_num_threads(options.threads)
    print(machine_line())
    tokens = input_data["token_ids"]
    eager = Pipeline()
    with jit.intercept(jit.JitConfig(tune_after=options.tune_after)):
        tuned = Pipeline()
    try:
        start = time.perf_counter()
        with torch.no_grad():
            for _ in range(options.tune_after):
                tuned(tokens)
            tuning_s = time.perf_counter() - start
            error = float((tuned(tokens) - eager(tokens)).abs().max())
            eager_ms, tuned_ms = interleaved_medians(lambda: eager(tokens), lambda: tuned(tokens), options.repeats)
        lines: list[str] = []
        jit.print_hierarchy(sink=lines.append)
        lines += [candidate_line(head.report) for head in jit.active_session().heads if head.report]
    finally:
        jit.disable()
    print("\n".join(line for line in lines if "detached" not in line))
    print("\n| example | eager ms | JIT-tuned ms | speedup | max abs error (0–255 image) | recording + tuning s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    print(
        f"| pipeline_app (4 steps, 32², batch 2) | {eager_ms:.1f} | {tuned_ms:.1f} | {eager_ms / tuned_ms:.2f}×"
        f" | {error:.1f} | {tuning_s:.0f} |"
    )


if __name__ == "__main__":
    main()
