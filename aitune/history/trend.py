"""Trends over stored runs: the rows worth showing, and a sparkline of each, for the terminal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from aitune.history.record import RUN_TIME

if TYPE_CHECKING:  # the sparkline needs no database layer
    from aitune.history.store import TrendPoint

BARS = "▁▂▃▄▅▆▇█"
SHORT_COMMIT = 10
"""Characters of a commit a trend shows (a git hash's first ten tell runs apart)."""
GAP = " "


def sparkline(values: Sequence[float | None]) -> str:
    """One bar per value, scaled between the smallest and the largest; a blank where a run lacks the row.

    >>> sparkline([1, 2, 3, None, 8])
    '▁▂▃ █'
    """
    present = [value for value in values if value is not None]
    if not present:
        return GAP * len(values)
    low, high = min(present), max(present)
    span = high - low
    return "".join(
        GAP if value is None else BARS[0 if span == 0 else round((value - low) / span * (len(BARS) - 1))]
        for value in values
    )


def top_paths(points: Sequence[TrendPoint], limit: int) -> list[str]:
    """The run time, then the ``limit`` rows with the largest median in the latest run."""
    if not points:
        return []
    latest = points[-1].medians
    rows = sorted((path for path in latest if path != RUN_TIME), key=lambda path: -latest[path])
    return [RUN_TIME, *rows[:limit]]


def values_of(points: Sequence[TrendPoint], path: str) -> list[float | None]:
    """The row's median in each run (None where a run lacks it)."""
    return [point.medians.get(path) for point in points]
