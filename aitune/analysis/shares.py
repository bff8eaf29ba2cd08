"""A part's share of a whole: the one definition every stage reads (plain Python: document readers need no numpy)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

SPANS_RUN_FRACTION = 0.9
"""A region alone at its level spans the run when it holds at least this median share of the run's CPU time."""


def fraction(part_us: float, whole_us: float) -> float:
    """``part / whole`` clamped to [0, 1]; 0 when the whole is empty."""
    return min(1.0, max(0.0, part_us / whole_us)) if whole_us > 0 else 0.0


def median_share(fractions: Sequence[float]) -> float:
    """A region's share of the run: the median over runs of its per-run fraction (0 with no runs).

    The one definition every reader shows (terminal, Markdown, viewer, suggest), so one region reads
    the same share everywhere; a ratio of medians (median region time ÷ median run) would differ.
    Like any median, the shares of one level need not add up to exactly 100%.
    """
    return statistics.median(fractions) if fractions else 0.0
