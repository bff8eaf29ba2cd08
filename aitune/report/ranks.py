"""What every reader shows of a merged document's ``ranks`` block: one row per rank, one per region across ranks.

The terminal, the Markdown and the viewer read these rows, so a rank's figures read the same in
each; `aitune.merge` writes the block.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


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


def is_merged(doc: Mapping[str, Any]) -> bool:
    """Whether ``doc`` was written by ``aitune-profile merge`` (it has a ``ranks`` block)."""
    return "ranks" in doc


def world_size(doc: Mapping[str, Any]) -> int | None:
    """The number of ranks a merged document merged; None for a single capture."""
    return doc["ranks"]["world_size"] if is_merged(doc) else None


def rank_rows(doc: Mapping[str, Any]) -> list[RankRow]:
    """One row per rank of a merged document, by rank; [] for a single capture."""
    if not is_merged(doc):
        return []
    ranks = doc["ranks"]
    named = {item["rank"]: item["region_id"] for item in ranks["stragglers"]}
    rows = []
    for entry in ranks["per_rank"]:
        times, waits = entry["run_times_us"], entry.get("barrier_wait_us")
        rows.append(
            RankRow(
                rank=entry["rank"],
                median_us=statistics.median(times),
                min_us=min(times),
                max_us=max(times),
                barrier_wait_us=statistics.median(waits) if waits else None,
                slowest_steps=ranks["step_ranks"].count(entry["rank"]),
                straggler_region=named.get(entry["rank"]),
            )
        )
    return rows


def regions_across_ranks(doc: Mapping[str, Any]) -> list[RegionAcrossRanks]:
    """Every region of a merged document (the residual too), slowest rank's median first; [] for a single capture."""
    if not is_merged(doc):
        return []
    rows = [
        RegionAcrossRanks(item["region_id"], item["median_us"], item["slowest_rank"], item.get("imbalance"))
        for item in doc["ranks"]["regions"]
    ]
    return sorted(rows, key=lambda row: (-row.max_us, row.region_id))
