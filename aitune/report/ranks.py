"""What every reader shows of a merged document's ``ranks`` block: one row per rank, one per region across ranks.

The terminal, the Markdown and the viewer read these rows, so a rank's figures read the same in
each; `aitune.report.merge` writes the block.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from aitune.errors import ProfileError
from aitune.report.model import UNSET, ProfileLike, as_profile, given


@dataclass(frozen=True)
class RankRow:
    """One rank of a merged run: its step times (µs), its barrier wait and how often it was the slowest."""

    rank: int
    median_us: float
    min_us: float
    max_us: float
    barrier_wait_us: float | None  # median over runs; None when the capture did not report it
    slowest_steps: int  # steps in which this rank finished last (the merged runs copied from it)
    straggler_region: str | None  # the region that makes it slow, when it is a straggler


@dataclass(frozen=True)
class RegionAcrossRanks:
    """One region (or the residual) across ranks: each rank's median (µs), the slowest rank and the imbalance."""

    region_id: str
    medians_us: list[float]
    slowest_rank: int
    imbalance: float | None

    @property
    def max_us(self) -> float:
        return self.medians_us[self.slowest_rank]


def is_merged(doc: ProfileLike) -> bool:
    """Whether ``doc`` was written by ``aitune-profile merge`` (it has a ``ranks`` block)."""
    return as_profile(doc).ranks is not UNSET


def check_ranks(doc: ProfileLike, name: str) -> None:
    """`ProfileError` naming ``name`` unless a merged document's ``ranks`` block agrees with itself.

    The schema gives each field its type; this says what no schema can: ``world_size`` is the number of
    ``per_rank`` entries, they are ranks 0..n-1 in order, and every rank the block names
    (``critical_rank``, ``step_ranks``, ``slowest_rank``) is one of them, with one median per rank. So a
    reader may size a table by ``world_size``: the file holds that many ranks, never a number it merely
    states. Nothing for a single capture.
    """
    ranks = as_profile(doc).ranks
    if ranks is UNSET:
        return
    size = len(ranks.per_rank)
    fix = "merge the rank folders again"
    if ranks.world_size != size:
        raise ProfileError(
            f"{name}: ranks.world_size is {ranks.world_size} but ranks.per_rank lists {size} ranks; {fix}."
        )
    if [entry.rank for entry in ranks.per_rank] != list(range(size)):
        raise ProfileError(f"{name}: ranks.per_rank must list ranks 0 to {size - 1} in order; {fix}.")
    spreads = [ranks.run_time, *ranks.regions]
    named = [ranks.critical_rank, *ranks.step_ranks, *(spread.slowest_rank for spread in spreads)]
    if any(rank >= size for rank in named) or any(len(spread.median_us) != size for spread in spreads):
        raise ProfileError(f"{name}: ranks names a rank outside 0 to {size - 1}, or lacks a rank's median; {fix}.")


def world_size(doc: ProfileLike) -> int | None:
    """The number of ranks a merged document merged; None for a single capture."""
    ranks = as_profile(doc).ranks
    return None if ranks is UNSET else ranks.world_size


def rank_rows(doc: ProfileLike) -> list[RankRow]:
    """One row per rank of a merged document, by rank; [] for a single capture."""
    ranks = as_profile(doc).ranks
    if ranks is UNSET:
        return []
    named = {item.rank: item.region_id for item in ranks.stragglers}
    rows = []
    for entry in ranks.per_rank:
        times, waits = entry.run_times_us, given(entry.barrier_wait_us, None)
        rows.append(
            RankRow(
                rank=entry.rank,
                median_us=statistics.median(times),
                min_us=min(times),
                max_us=max(times),
                barrier_wait_us=statistics.median(waits) if waits else None,
                slowest_steps=ranks.step_ranks.count(entry.rank),
                straggler_region=named.get(entry.rank),
            )
        )
    return rows


def regions_across_ranks(doc: ProfileLike) -> list[RegionAcrossRanks]:
    """Every region of a merged document (the residual too), slowest rank's median first; [] for a single capture."""
    ranks = as_profile(doc).ranks
    if ranks is UNSET:
        return []
    rows = [
        RegionAcrossRanks(item.region_id, item.median_us, item.slowest_rank, given(item.imbalance, None))
        for item in ranks.regions
    ]
    return sorted(rows, key=lambda row: (-row.max_us, row.region_id))
