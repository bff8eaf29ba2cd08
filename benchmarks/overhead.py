"""Capture overhead on the bundled examples, as ratios measured in one process.

(a) median wall of a measured run under capture ÷ median wall of the same call uninstrumented;
(b) the whole ``profile()`` call's wall ÷ the plain time of the runs it performed
    (warmups + the profiler warmup + measured runs).
Plain and captured timings are interleaved so machine drift hits both. Targets: (a) ≤ 1.10, (b) ≤ 1.5.

    .venv/bin/python benchmarks/overhead.py [--repeats 5] [--warmup 3] [--runs 10]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

import decoder_app
import pipeline_app

import aitune
import aitune.torch as ait


def wall_us(call: Callable[[], Any]) -> float:
    start = time.perf_counter_ns()
    call()
    return (time.perf_counter_ns() - start) / 1000


def measure(name: str, obj: Any, function: Callable[..., Any], input_data: dict, options: argparse.Namespace) -> dict:
    def call() -> Any:
        with torch.no_grad():
            return function(**input_data)

    performed = options.warmup + 1 + options.runs
    plain: list[float] = []
    captured: list[float] = []
    whole_ratios: list[float] = []
    for _ in range(options.repeats):
        batch = [wall_us(call) for _ in range(options.runs)]
        start = time.perf_counter_ns()
        prof = ait.profile(obj, input_data, function, warmup_runs=options.warmup, measured_runs=options.runs)
        whole_us = (time.perf_counter_ns() - start) / 1000
        plain += batch
        captured += [run["timing"]["wall_time_us"] for run in prof.data["runs"]]
        whole_ratios.append(whole_us / (statistics.median(batch) * performed))
    return {
        "example": name,
        "plain_ms": statistics.median(plain) / 1000,
        "captured_ms": statistics.median(captured) / 1000,
        "run_ratio": statistics.median(captured) / statistics.median(plain),
        "whole_ratio": statistics.median(whole_ratios),
        "regions": len(prof.data["regions"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="capture overhead as ratios")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10)
    options = parser.parse_args()

    cold_start = time.perf_counter()
    ait.profile(pipeline_app.pipe, pipeline_app.input_data, pipeline_app.infer, warmup_runs=0, measured_runs=1)
    cold_s = time.perf_counter() - cold_start  # the profiler's one-time start-up in a process

    rows = [
        measure("pipeline_app (infer)", pipeline_app.pipe, pipeline_app.infer, pipeline_app.input_data, options),
        measure("decoder_app (generate)", decoder_app.model, decoder_app.infer, decoder_app.input_data, options),
    ]
    print(
        f"aitune {aitune.__version__}, torch {torch.__version__}, Python {platform.python_version()}, "
        f"{platform.machine()}, {torch.get_num_threads()} torch threads"
    )
    print(
        f"repeats={options.repeats} warmup={options.warmup} runs={options.runs}; "
        f"first profile() in the process (profiler start-up included): {cold_s:.2f} s\n"
    )
    print("| example | regions | plain run (ms) | captured run (ms) | (a) run ratio | (b) whole profile() ratio |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['example']} | {row['regions']} | {row['plain_ms']:.2f} | {row['captured_ms']:.2f} | "
            f"{row['run_ratio']:.3f} | {row['whole_ratio']:.3f} |"
        )


if __name__ == "__main__":
    main()
