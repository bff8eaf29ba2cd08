"""Per-rank capture overhead under torch.distributed, as ratios measured on every rank of one job.

Each rank runs examples/tensor_parallel_app.py (a tensor-parallel MLP whose every call all-reduces)
and, in interleaved rounds: a batch of plain calls, each after an untimed barrier (so a plain call,
like a captured run, starts when every rank does), then one full and one lite ``aitune.torch.profile``.
Per rank: (a) median wall of a measured run under capture ÷ median plain call; the median barrier
wait before a measured run (outside the run, reported, not in (a)); (b) the whole ``profile()``
call's wall ÷ the plain time of the calls it made. Medians over all rounds; rank 0 prints the table.

    OMP_NUM_THREADS=1 torchrun --nproc-per-node 2 benchmarks/distributed_capture.py [--repeats 5] [--warmup 3] \
        [--runs 10]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import tensor_parallel_app as app  # initialises the job's gloo group, as the app does under torchrun
from overhead import wall_us

import aitune
import aitune.torch as ait


def measure(options: argparse.Namespace) -> dict[str, Any]:
    """This rank's medians over ``options.repeats`` interleaved rounds."""
    plain: list[float] = []
    captured: dict[str, list[float]] = {"full": [], "lite": []}
    waits: list[float] = []
    whole: dict[str, list[float]] = {"full": [], "lite": []}
    performed: dict[str, list[int]] = {"full": [], "lite": []}
    for _ in range(options.repeats):
        batch = []
        for _ in range(options.runs):
            dist.barrier()
            batch.append(wall_us(app.infer))
        plain += batch
        for mode in ("full", "lite"):
            start = time.perf_counter_ns()
            prof = ait.profile(
                app.model, None, app.infer, warmup_runs=options.warmup, measured_runs=options.runs, mode=mode
            )
            whole_us = (time.perf_counter_ns() - start) / 1000
            runs = prof.data["runs"]
            calls = prof.data["warmup"]["performed"] + 1 + len(runs)  # warmups, the instrumented warmup, the runs
            captured[mode] += [run["timing"]["wall_time_us"] for run in runs]
            whole[mode].append(whole_us / (statistics.median(batch) * calls))
            performed[mode].append(calls)
            if mode == "full":
                waits += [run["barrier_wait_us"] for run in runs]
    return {
        "rank": dist.get_rank(),
        "plain_ms": statistics.median(plain) / 1000,
        "captured_ms": statistics.median(captured["full"]) / 1000,
        "run_ratio": statistics.median(captured["full"]) / statistics.median(plain),
        "lite_run_ratio": statistics.median(captured["lite"]) / statistics.median(plain),
        "wait_ms": statistics.median(waits) / 1000,
        "whole_ratio": statistics.median(whole["full"]),
        "lite_whole_ratio": statistics.median(whole["lite"]),
        "calls": statistics.median(performed["full"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="per-rank capture overhead as ratios")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10)
    options = parser.parse_args()
    torch.set_num_threads(1)
    load_start = os.getloadavg()[0]
    row = measure(options)
    rows: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(rows, row)
    if dist.get_rank() == 0:
        print(
            f"aitune {aitune.__version__}, torch {torch.__version__}, Python {platform.python_version()}, "
            f"{platform.machine()}, {os.cpu_count()} CPUs, {dist.get_world_size()} ranks ({dist.get_backend()}), "
            f"1 torch thread per rank; load average {load_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end"
        )
        print(f"repeats={options.repeats} warmup={options.warmup} runs={options.runs}\n")
        print(
            "| rank | plain call (ms) | captured run (ms) | (a) run ratio | barrier wait before a run (ms) "
            "| (b) whole profile() ratio | lite (a) | lite (b) |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(
                f"| {r['rank']} | {r['plain_ms']:.2f} | {r['captured_ms']:.2f} | {r['run_ratio']:.3f} | "
                f"{r['wait_ms']:.2f} | {r['whole_ratio']:.3f} | {r['lite_run_ratio']:.3f} | "
                f"{r['lite_whole_ratio']:.3f} |"
            )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
