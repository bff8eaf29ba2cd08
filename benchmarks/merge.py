"""Merge cost: `aitune-profile merge`'s read + merge + write for 2 ranks of real captures, and for 64.

Captures the decoder example twice (two "ranks" of real documents, each with a region tree), gives
them the distributed block a capture under torchrun writes (`tests/ranks.py`, the tests' builder),
then times, median of N: reading and checking the rank folder, merging, and writing the merged
profile.json and profile.md — for those 2 ranks, and for 64 ranks made of copies of them. Peak
memory is `tracemalloc`'s peak of Python allocations over one read + merge. The 64-rank figures
are measured, and set beside the estimate from the 2-rank cost per rank.

    OMP_NUM_THREADS=1 PYTHONPATH=. .venv/bin/python benchmarks/merge.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "tests")]

import decoder_app  # noqa: E402
from ranks import as_ranks, write_ranks  # noqa: E402

import aitune.torch as ait  # noqa: E402
from aitune.cli.outputs import write_profile  # noqa: E402
from aitune.merge import merge_profiles, read_rank_profiles  # noqa: E402


def seconds(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def peak_mib(call: Callable[[], object]) -> float:
    tracemalloc.start()
    call()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def measure(folder: Path, repeats: int) -> dict[str, float]:
    """Median seconds of each step over ``repeats``, and the peak MiB of one read + merge."""
    profiles = read_rank_profiles(folder)
    doc = merge_profiles(profiles)
    return {
        "read": statistics.median(seconds(lambda: read_rank_profiles(folder)) for _ in range(repeats)),
        "merge": statistics.median(seconds(lambda: merge_profiles(profiles)) for _ in range(repeats)),
        "write": statistics.median(seconds(lambda: write_profile(folder / "merged", doc)) for _ in range(repeats)),
        "peak_mib": peak_mib(lambda: merge_profiles(read_rank_profiles(folder))),
        "rank_kib": (folder / "rank0" / "profile.json").stat().st_size / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--ranks", type=int, default=64)
    options = parser.parse_args()
    captures = [
        ait.profile(decoder_app.model, decoder_app.input_data, decoder_app.infer, warmup_runs=1, measured_runs=5).data
        for _ in range(2)
    ]
    with tempfile.TemporaryDirectory() as scratch:
        two = measure(write_ranks(Path(scratch) / "two", as_ranks(captures)), options.repeats)
        many_docs = as_ranks([captures[rank % 2] for rank in range(options.ranks)])
        many = measure(write_ranks(Path(scratch) / "many", many_docs), options.repeats)
    size = f"{two['rank_kib']:.0f} KiB per rank's profile.json"
    print(f"decoder example, 5 runs per rank, {size}, median of {options.repeats}")
    print("| ranks | read + check (s) | merge (s) | write (s) | total (s) | peak (MiB) |")
    print("|---|---|---|---|---|---|")
    for label, figures in (("2", two), (f"{options.ranks}", many)):
        total = figures["read"] + figures["merge"] + figures["write"]
        print(
            f"| {label} | {figures['read']:.3f} | {figures['merge']:.3f} | {figures['write']:.3f} | {total:.3f} | "
            f"{figures['peak_mib']:.1f} |"
        )
    scale = options.ranks / 2
    estimate = (two["read"] + two["merge"]) * scale
    print(
        f"estimate from 2 ranks for {options.ranks}: read + merge {estimate:.3f} s, "
        f"peak {two['peak_mib'] * scale:.1f} MiB (linear in ranks)"
    )


if __name__ == "__main__":
    main()
