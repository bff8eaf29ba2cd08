"""Regressions per region: a stored run against the runs before it, by a rank test and a threshold.

The rule (`judge`): a row (the run time, or a headline row) regressed when the new run's median
*and* its fastest sample are more than ``threshold`` above the baseline's (its median, and the median of
its runs' fastest samples), its median is above all but the highest tenth of the stored runs' medians
(`SPREAD_PERCENTILE`: beyond what the stored runs themselves varied by from one capture to the next), the
one-sided Mann–Whitney U test over the stored samples (each measured run of every baseline run,
pooled) gives p below ``alpha`` (asv's 0.002), and the rise is at least ``min_run_share`` of the
run's median time, so that a 3 µs region does not fail a gate by jitter alone.

Why the fastest sample: a loaded machine (a shared CI runner) preempts runs and stretches them, which
moves the median and the rank test (on this project's 2-core machine shared by several jobs, a 10 ms
region's median rose 40% in an unchanged capture) but leaves the fastest run near the code's own cost;
a change in the code moves that too. Pure functions; no database.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from aitune.analysis.statistics import percentile
from aitune.history.record import RunRecord, Series

ALPHA = 0.002
THRESHOLD = 0.10
MIN_RUN_SHARE = 0.005
SPREAD_PERCENTILE = 90


@dataclass(frozen=True)
class RowVerdict:
    """One row's judgment: medians (µs), their ratio (new ÷ baseline), the test's p, and whether it regressed."""

    path: str
    label: str
    baseline_us: float | None  # None: a row the baseline never had
    new_us: float
    ratio: float | None
    fast_ratio: float | None  # the new fastest sample ÷ the median of the baseline runs' fastest
    spread_us: float | None  # the `SPREAD_PERCENTILE`-th percentile of the baseline runs' medians
    p_value: float | None
    regressed: bool


def mann_whitney_greater(new: Sequence[float], old: Sequence[float]) -> float:
    """One-sided p-value that ``new`` tends to be larger than ``old`` (Mann–Whitney U, normal approximation
    with tie and continuity corrections); 1.0 when either side is empty or every value ties.

    >>> round(mann_whitney_greater([5, 6, 7, 8, 9], [1, 2, 3, 4, 5]), 4)
    0.008
    """
    n, m = len(new), len(old)
    if not n or not m:
        return 1.0
    ranks = _ranks([*new, *old])
    u = sum(ranks[:n]) - n * (n + 1) / 2
    ties = _tie_term([*new, *old])
    total = n + m
    variance = n * m / 12 * ((total + 1) - ties / (total * (total - 1)))
    if variance <= 0:
        return 1.0
    z = (u - n * m / 2 - 0.5) / math.sqrt(variance)
    return 0.5 * math.erfc(z / math.sqrt(2))


def _ranks(values: Sequence[float]) -> list[float]:
    """Ranks from 1, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def _tie_term(values: Sequence[float]) -> float:
    counts: dict[float, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return float(sum(t**3 - t for t in counts.values()))


def judge(
    new: RunRecord,
    baseline: Sequence[RunRecord],
    threshold: float = THRESHOLD,
    alpha: float = ALPHA,
    min_run_share: float = MIN_RUN_SHARE,
) -> list[RowVerdict]:
    """Each row of ``new`` (run time first) judged against the pooled samples of the same row in ``baseline``."""
    stored: dict[str, list[Series]] = {}
    for record in baseline:
        for series in record.series:
            if series.times_us:
                stored.setdefault(series.path, []).append(series)
    floor_us = min_run_share * new.run_time.median_us
    return [_verdict(series, stored.get(series.path, []), threshold, alpha, floor_us) for series in new.series]


def _verdict(series: Series, stored: Sequence[Series], threshold: float, alpha: float, floor_us: float) -> RowVerdict:
    new = series.times_us
    new_us = statistics.median(new) if new else 0.0
    if not stored or not new:
        return RowVerdict(series.path, series.label, None, new_us, None, None, None, None, False)
    old = [value for run in stored for value in run.times_us]
    old_us = statistics.median(old)
    ratio = _ratio(new_us, old_us)
    fast_ratio = _ratio(min(new), statistics.median(min(run.times_us) for run in stored))
    spread_us = percentile([run.median_us for run in stored], SPREAD_PERCENTILE)
    p_value = mann_whitney_greater(new, old)
    slower = all(value is not None and value > 1 + threshold for value in (ratio, fast_ratio))
    regressed = slower and new_us > spread_us and p_value < alpha and new_us - old_us >= floor_us
    return RowVerdict(series.path, series.label, old_us, new_us, ratio, fast_ratio, spread_us, p_value, regressed)


def _ratio(new: float, old: float) -> float | None:
    return new / old if old > 0 else None


def regressions(verdicts: Sequence[RowVerdict]) -> list[RowVerdict]:
    """The rows that regressed, in the verdicts' order."""
    return [verdict for verdict in verdicts if verdict.regressed]
