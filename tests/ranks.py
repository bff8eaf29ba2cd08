"""Per-rank profile folders as a distributed capture writes them, built from real single-process captures.

The one place the merge tests (and ``benchmarks/merge.py``) get their ``DIR/rank<r>/profile.json``
folders from: each "rank" is a real `aitune.torch.profile` capture of a small sharded block, given
the ``distributed`` block and the per-run ``barrier_wait_us`` a capture under torchrun writes. When
real torchrun captures exist, `rank_folder` is the function to swap for them.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aitune.report import save
from aitune.report.merge import RankProfile, merge_profiles

ATTENTION, MLP = "untuned_module:attention", "untuned_module:mlp"
MLP_MS = 3.0
SLOW_MLP_MS = 30.0
"""A straggler's MLP: 27 ms more than its peers', far beyond what a loaded machine adds to a 5 ms step."""


def capture_shard(mlp_ms: float = MLP_MS, runs: int = 7) -> dict[str, Any]:
    """A real capture of one `busy.Shard` (a 2 ms attention, then an MLP of ``mlp_ms``): its profile document."""
    # torch only here: the viewer tests merge hand-built documents and need none of it.
    import torch
    from busy import Shard

    import aitune.torch as ait

    return ait.profile(Shard(mlp_ms), torch.ones(1, 4), warmup_runs=1, measured_runs=runs).data


def as_ranks(docs: Sequence[Mapping[str, Any]], backend: str = "gloo", ranks_per_host: int = 8) -> list[dict[str, Any]]:
    """Copies of ``docs`` as ranks 0..n-1 of one run, by the capture contract: a ``distributed`` block each, and
    before run *i* the wait in the barrier for the slowest rank's run *i*-1 (none before the first)."""
    ranked = [copy.deepcopy(dict(doc)) for doc in docs]
    times = [[run["timing"]["cpu_time_us"] for run in doc["runs"]] for doc in ranked]
    for rank, doc in enumerate(ranked):
        doc["distributed"] = {
            "rank": rank,
            "world_size": len(ranked),
            "local_rank": rank % ranks_per_host,
            "backend": backend,
            "host_index": rank // ranks_per_host,
        }
        for index, run in enumerate(doc["runs"]):
            slowest = max(column[index - 1] for column in times) if index else 0.0
            run["barrier_wait_us"] = slowest - times[rank][index - 1] if index else 0.0
    return ranked


def write_ranks(folder: Path, docs: Sequence[Mapping[str, Any]]) -> Path:
    """``folder/rank<r>/profile.json`` for each document (already ranked by `as_ranks`); returns ``folder``."""
    for doc in docs:
        save(doc, folder / f"rank{doc['distributed']['rank']}" / "profile.json")
    return folder


def rank_folder(folder: Path, docs: Sequence[Mapping[str, Any]]) -> Path:
    """The folder a distributed capture of ``docs`` (one per rank, in rank order) would have written."""
    return write_ranks(folder, as_ranks(docs))


def merged(docs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The merged document of ``docs`` as ranks 0..n-1 (see `as_ranks`), without going through files."""
    ranked = as_ranks(docs)
    return merge_profiles([RankProfile(rank, Path(f"rank{rank}/profile.json"), doc) for rank, doc in enumerate(ranked)])


def main(argv: Sequence[str]) -> None:
    """``python tests/ranks.py DIR``: a 2-rank folder, rank 1 slowed inside its MLP, for trying ``merge``."""
    if len(argv) != 1:
        raise SystemExit("usage: python tests/ranks.py DIR")
    folder = rank_folder(Path(argv[0]), [capture_shard(), capture_shard(SLOW_MLP_MS)])
    print(f"wrote {', '.join(sorted(str(path) for path in folder.glob('rank*/profile.json')))}")


if __name__ == "__main__":
    main(sys.argv[1:])
