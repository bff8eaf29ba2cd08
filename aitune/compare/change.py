"""One quantity before and after: its medians, their ratio and the ratio's bootstrap interval (no torch)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from aitune.analysis.statistics import bootstrap_ratio_interval


@dataclass(frozen=True)
class Change:
    """One quantity before and after: medians over runs (µs), after ÷ before, and its confidence interval.

    A side where the quantity does not exist has ``None``; so do the ratio and interval then.
    """

    before_us: float | None
    after_us: float | None
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None

    @property
    def beyond_noise(self) -> bool:
        """True when the interval excludes 1 (no interval: the difference cannot be told from noise)."""
        return self.ci_low is not None and self.ci_high is not None and (self.ci_low > 1 or self.ci_high < 1)


def change(before: Sequence[float], after: Sequence[float]) -> Change:
    """Medians, their ratio and the bootstrap interval of the ratio; ``None`` for an empty side."""
    before_us = statistics.median(before) if before else None
    after_us = statistics.median(after) if after else None
    if before_us is None or after_us is None or before_us <= 0:
        return Change(before_us, after_us)
    low_high = bootstrap_ratio_interval(before, after) if min(len(before), len(after)) >= 2 else (None, None)
    return Change(before_us, after_us, after_us / before_us, *low_high)
