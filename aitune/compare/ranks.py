"""Before and after tuning, per rank and for the job (no torch): what a tuning under torchrun reports.

Run *i* is the same step on every rank (the capture's barrier aligns them), and a step ends when its
slowest rank ends: the job's time of step *i* is the largest of the ranks' run *i* times, and the job's
figure is the median of those, before ÷ after. Each rank's own figure is the median of its own runs.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from aitune.compare.report_model import Ranks
from aitune.report.formatting import factor, ms
from aitune.report.model import ProfileLike, as_profile

MEDIAN_DIGITS = 3
"""Decimals of a median run (µs) as the figures give it; the slowest rank is the slowest at that precision."""


def run_times(doc: ProfileLike) -> list[float]:
    """The host time of each measured run of a profile document, in µs."""
    return [float(run.timing.cpu_time_us) for run in as_profile(doc).runs]


def rank_figures(before: Sequence[Sequence[float]], after: Sequence[Sequence[float]]) -> dict[str, Any]:
    """Per rank (by index) and for the job: the median run before and after tuning and the speedup.

    >>> figures = rank_figures([[10.0, 12.0], [20.0, 22.0]], [[5.0, 6.0], [10.0, 12.0]])
    >>> figures["job"], figures["slowest_rank"]
    ({'before_us': 21.0, 'after_us': 11.0, 'speedup': 1.9091}, 1)
    """
    medians = [
        (statistics.median(times_before), statistics.median(times_after))
        for times_before, times_after in zip(before, after, strict=True)
    ]
    ranks = [{"rank": rank, **_figure(*pair)} for rank, pair in enumerate(medians)]
    job = _figure(statistics.median(_steps(before)), statistics.median(_steps(after)))
    slowest = max(range(len(medians)), key=lambda rank: round(medians[rank][1], MEDIAN_DIGITS))
    return {"world_size": len(ranks), "ranks": ranks, "job": job, "slowest_rank": slowest}


def rank_lines(figures: Ranks | Mapping[str, Any] | None) -> list[str]:
    """The terminal's lines: each rank's median run before → after, then the job's (its slowest rank's) figure.

    ``figures``: `rank_figures`' (with the stragglers the loop adds), or a compare report's, read as its model's
    `Ranks`."""
    if not figures:
        return []
    ranks = figures if isinstance(figures, Ranks) else msgspec.convert(figures, Ranks)
    lines = [
        f"rank {row.rank}: {ms(row.before_us)} → {ms(row.after_us)} ms median run, {factor(row.speedup)}"
        for row in ranks.ranks
    ]
    lines += [f"straggler before tuning: {message}" for message in ranks.stragglers]
    job = ranks.job
    lines.append(
        f"the job ({ranks.world_size} ranks, each step as long as its slowest rank; slowest after tuning: rank "
        f"{ranks.slowest_rank}): {ms(job.before_us)} → {ms(job.after_us)} ms, {factor(job.speedup)}"
    )
    return lines


def _steps(ranks: Sequence[Sequence[float]]) -> list[float]:
    """Each step's time for the job: its slowest rank's (every rank has the same runs)."""
    return [max(step) for step in zip(*ranks, strict=True)]


def _figure(before_us: float, after_us: float) -> dict[str, Any]:
    speedup = round(before_us / after_us, 4) if after_us > 0 else None
    return {
        "before_us": round(before_us, MEDIAN_DIGITS),
        "after_us": round(after_us, MEDIAN_DIGITS),
        "speedup": speedup,
    }
