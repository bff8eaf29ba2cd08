"""Merge cost: `aitune-profile merge`'s read + merge + write for 2 ranks of real captures, for 64 and for 1,024.

Captures the decoder example twice (two "ranks" of real documents, each with a region tree), gives
them the distributed block a capture under torchrun writes (`tests/ranks.py`, the tests' builder),
then times, median of N: reading and checking the rank folder, merging, and writing the merged
profile.json and profile.md — for those 2 ranks, and for 64 and 1,024 ranks made of copies of them.
"read + merge" is what the command does: `merge_profiles(rank_profiles(folder))`, one rank's document
in memory at a time. Peak memory is `tracemalloc`'s peak of Python allocations over one read +
merge; it grows with what the merged document holds (each rank's run and region times), not with
the ranks' documents. The targets: 64 ranks in 3 s, 1,024 in 45 s, whole command.

    OMP_NUM_THREADS=1 PYTHONPATH=. .venv/bin/python benchmarks/merge.py [--repeats 3] [--ranks 64,1024]
"""

from __future__ import annotations

import argparse
import shutil
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
from aitune.report.merge import merge_profiles, rank_profiles  # noqa: E402


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
    doc = merge_profiles(rank_profiles(folder))
    return {
        "read_merge": statistics.median(seconds(lambda: merge_profiles(rank_profiles(folder))) for _ in range(repeats)),
        "write": statistics.median(seconds(lambda: write_profile(folder / "merged", doc)) for _ in range(repeats)),
        "peak_mib": peak_mib(lambda: merge_profiles(rank_profiles(folder))),
        "rank_kib": (folder / "rank0" / "profile.json").stat().st_size / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ranks", default="64,1024", help="rank counts to measure besides 2, comma-separated")
    options = parser.parse_args()
    captures = [
        ait.profile(decoder_app.model, decoder_app.input_data, decoder_app.infer, warmup_runs=1, measured_runs=5).data
        for _ in range(2)
    ]
    counts = [int(word) for word in options.ranks.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        rows.append(("2", measure(write_ranks(Path(scratch) / "two", as_ranks(captures)), options.repeats)))
        for count in counts:
            docs = as_ranks([captures[rank % 2] for rank in range(count)])
            rows.append((f"{count:,}", measure(write_ranks(Path(scratch) / f"r{count}", docs), options.repeats)))
            shutil.rmtree(Path(scratch) / f"r{count}")
    two = rows[0][1]
    size = f"{two['rank_kib']:.0f} KiB per rank's profile.json"
    print(f"decoder example, 5 runs per rank, {size}, median of {options.repeats}")
    print("| ranks | read + check + merge (s) | write (s) | total (s) | per rank (ms) | peak (MiB) |")
    print("|---|---|---|---|---|---|")
    for label, figures in rows:
        total = figures["read_merge"] + figures["write"]
        per_rank = 1000 * total / int(label.replace(",", ""))
        print(
            f"| {label} | {figures['read_merge']:.3f} | {figures['write']:.3f} | {total:.3f} | {per_rank:.1f} | "
            f"{figures['peak_mib']:.1f} |"
        )


if __name__ == "__main__":
    main()
