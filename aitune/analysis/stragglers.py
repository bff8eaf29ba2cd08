"""Stragglers among the ranks of one distributed run: pure functions over each rank's per-run samples (µs).

A sample set is a mapping rank → that rank's time in each measured run (the same steps on every
rank). Used by `aitune.report.merge`; nothing here reads a file or a document.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aitune.analysis.statistics import OUTLIER_MADS

STRAGGLER_MADS = OUTLIER_MADS
"""A rank is a straggler when its median step exceeds the other ranks' median by more than this many
MADs of the steps (the run-to-run spread, see `excess_over_others`) … Calibrated on synthetic
ranks of one step with 10% normal noise and one run in ten preempted (1.5×), 10 runs each: about 1
like rank in 1,300 of 2 is called a straggler, none of 8; a rank 15% slower is found 99.6% of the
time at 2% noise, 58% at 5%."""

STRAGGLER_MIN_MARGIN = 0.05
"""… and by more than this fraction of it. On a quiet machine 3 MADs can be a percent or two: the
margin keeps a small steady difference between like ranks (where their threads run) from being
called slow, while a rank 5% slower holds every other rank 5% of every step, which is worth a look."""

REGION_SHARE_OF_EXCESS = 0.8
"""The region named for a straggler: the smallest one whose extra time is at least this fraction of
the largest region's, so a block inside a slow stage is named rather than the stage around it."""


@dataclass(frozen=True)
class Straggler:
    """A rank slower than the others beyond noise: its median and theirs (µs), and the region that makes it slow."""

    rank: int
    own_us: float
    others_us: float
    region: str  # a region id, or the residual's key in the samples when the extra time lies outside every region
    region_excess_us: float


def slowest(values: Sequence[float]) -> int:
    """The index of the largest value (the lowest index among equals)."""
    return max(range(len(values)), key=lambda index: (values[index], -index))


def imbalance(medians: Sequence[float]) -> float | None:
    """Load imbalance across ranks: max ÷ median of their medians (1 is perfect balance); None when the median is 0."""
    middle = statistics.median(medians)
    return max(medians) / middle if middle > 0 else None


def excess_over_others(samples: Mapping[int, Sequence[float]], rank: int) -> tuple[float, float, float]:
    """(rank's median, the other ranks' pooled median, the run-to-run spread), all µs, over per-run samples.

    The spread is the larger MAD of the two sides: a rank whose runs were half preempted has a median
    far off, and a spread as wide, and is not called slow for it.
    """
    own = samples[rank]
    others = [value for other, values in samples.items() if other != rank for value in values]
    own_median, base = statistics.median(own), statistics.median(others)
    spread = max(_mad(others, base), _mad(own, own_median))
    return own_median, base, spread


def is_straggler(own: float, base: float, spread: float) -> bool:
    """Slower beyond noise: above the others' median by more than `STRAGGLER_MADS` × ``spread`` and by
    `STRAGGLER_MIN_MARGIN` of it."""
    return base > 0 and own - base > max(STRAGGLER_MADS * spread, STRAGGLER_MIN_MARGIN * base)


def stragglers(
    run_times: Mapping[int, Sequence[float]], regions: Mapping[int, Mapping[str, Sequence[float]]]
) -> list[Straggler]:
    """The ranks whose per-run step times exceed the other ranks' beyond noise (`is_straggler`), each with the
    region that makes it slow (`slow_region`); none with a single rank."""
    found = []
    for rank in run_times if len(run_times) > 1 else ():
        own, base, mad = excess_over_others(run_times, rank)
        if is_straggler(own, base, mad):
            region, extra = slow_region(regions, rank)
            found.append(Straggler(rank, own, base, region, extra))
    return found


def slow_region(regions: Mapping[int, Mapping[str, Sequence[float]]], rank: int) -> tuple[str, float]:
    """Where ``rank``'s extra time goes: the smallest region whose median excess over the other ranks is at least
    `REGION_SHARE_OF_EXCESS` of the largest (the residual counts as a region); with that excess in µs."""
    excess: dict[str, tuple[float, float]] = {}
    for region in regions[rank]:
        samples = {other: values.get(region, [0.0]) for other, values in regions.items()}
        own, base, _ = excess_over_others(samples, rank)
        excess[region] = (own - base, own)
    largest = max(extra for extra, _ in excess.values())
    near = [region for region, (extra, _) in excess.items() if extra >= REGION_SHARE_OF_EXCESS * largest]
    chosen = min(near, key=lambda region: excess[region][1])
    return chosen, excess[chosen][0]


def _mad(values: Sequence[float], center: float) -> float:
    return statistics.median(abs(value - center) for value in values)
