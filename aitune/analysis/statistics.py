"""Statistics over measured runs: summaries, outlier runs, and the warnings they justify.

Percentiles interpolate linearly between order statistics (numpy's default), so a hand
computation on a short list gives the same numbers.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any, TypedDict

from aitune.analysis.attribution import AttributedRun, fraction
from aitune.analysis.warnings import ProfileWarning, warning

OUTLIER_MADS = 3.0
"""A run is an outlier when it lies more than this many MADs from the median."""

HIGH_CV = 0.10
"""A coefficient of variation above this earns a warning: the medians are not to be trusted yet."""


class Summary(TypedDict):
    count: int
    median: float
    mean: float
    std: float
    p10: float
    p90: float
    cv: float
    min: float
    max: float


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0–100) with linear interpolation.

    >>> percentile([1.0, 2.0, 3.0, 4.0], 10)
    1.3
    """
    assert values, "percentile of no values"
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summarize(values: Sequence[float]) -> Summary:
    """Median, mean, population std, p10/p90, CV (std / mean; 0 when the mean is 0), min and max."""
    assert values, "summary of no values"
    mean = statistics.fmean(values)
    std = statistics.pstdev(values) if len(values) > 1 else 0.0
    return Summary(
        count=len(values),
        median=statistics.median(values),
        mean=mean,
        std=std,
        p10=percentile(values, 10),
        p90=percentile(values, 90),
        cv=std / mean if mean else 0.0,
        min=min(values),
        max=max(values),
    )


def outlier_indices(values: Sequence[float], mads: float = OUTLIER_MADS) -> list[int]:
    """Indices of values more than ``mads`` median absolute deviations from the median.

    >>> outlier_indices([10.0, 10.2, 9.9, 10.1, 30.0])
    [4]
    """
    if len(values) < 3:
        return []
    median = statistics.median(values)
    mad = statistics.median(abs(value - median) for value in values)
    if mad == 0:
        return [index for index, value in enumerate(values) if value != median]
    return [index for index, value in enumerate(values) if abs(value - median) > mads * mad]


def run_time_warnings(name: str, values: Sequence[float], source: str = "statistics") -> list[ProfileWarning]:
    """RUN_OUTLIERS (with run indices) and HIGH_RUN_VARIANCE for one run-time series."""
    found: list[ProfileWarning] = []
    outliers = outlier_indices(values)
    if outliers:
        median = statistics.median(values)
        found.append(
            warning(
                "RUN_OUTLIERS",
                f"run(s) {', '.join(map(str, outliers))} have a {name} more than {OUTLIER_MADS:g} MADs from the median "
                f"({median / 1000:.3f} ms); something else ran on the machine or the workload varies — "
                "look at those runs in the trace, or add warmup runs.",
                source,
            )
        )
    summary = summarize(values) if values else None
    if summary and summary["cv"] > HIGH_CV:
        found.append(
            warning(
                "HIGH_RUN_VARIANCE",
                f"the {name} varies by {summary['cv']:.0%} (coefficient of variation) across {summary['count']} runs; "
                "medians are uncertain — measure more runs, add warmups, or quiet the machine.",
                source,
            )
        )
    return found


def run_statistics(runs: Sequence[AttributedRun]) -> dict[str, Any]:
    """Summaries over the measured runs: run timing, each topmost region (absent in a run = 0) and residual.

    Shape: ``{"runs": {"wall_time_us": Summary, ...}, "regions": [{"region_id", "cpu_time_us": Summary,
    "cpu_time_fraction": Summary, ...}], "residual": {"cpu_time_us": Summary, ...}}``; device keys only
    when the runs have device time.
    """
    if not runs:
        return {}
    domains = ["cpu"] + (["device"] if runs[0].device_time_us is not None else [])
    timing: dict[str, Summary] = {}
    if all(run.wall_time_us is not None for run in runs):
        timing["wall_time_us"] = summarize([run.wall_time_us or 0.0 for run in runs])
    for domain in domains:
        timing[f"{domain}_time_us"] = summarize([getattr(run, f"{domain}_time_us") or 0.0 for run in runs])

    region_ids = list(dict.fromkeys(region for run in runs for region in run.regions))
    regions = []
    for region in region_ids:
        entry: dict[str, Any] = {"region_id": region}
        for domain in domains:
            totals = [
                getattr(run.regions[region], f"{domain}_time_us") if region in run.regions else 0.0 for run in runs
            ]
            whole = [getattr(run, f"{domain}_time_us") or 0.0 for run in runs]
            entry[f"{domain}_time_us"] = summarize(totals)
            entry[f"{domain}_time_fraction"] = summarize([fraction(t, w) for t, w in zip(totals, whole, strict=True)])
        regions.append(entry)

    residuals = [run.residual() for run in runs]
    residual = {key: summarize([r[key] for r in residuals]) for key in residuals[0]}
    return {"runs": timing, "regions": regions, "residual": residual}


def statistics_warnings(runs: Sequence[AttributedRun]) -> list[ProfileWarning]:
    """Outlier runs and high variance, judged on wall time (CPU time when wall time is missing)."""
    if all(run.wall_time_us is not None for run in runs):
        return run_time_warnings("wall time", [run.wall_time_us or 0.0 for run in runs])
    return run_time_warnings("CPU time", [run.cpu_time_us for run in runs])


OVERHEAD_WARN_RATIO = 1.10


def capture_overhead(warmup_walls_us: Sequence[float], run_walls_us: Sequence[float]) -> dict[str, Any] | None:
    """Fastest measured run ÷ fastest uninstrumented warmup (the first, cold one left out); None without one.

    Minimums, not medians: warmups still carry first-call costs (allocations, kernel selection) and a
    busy machine stretches single calls, and both only ever add time, so the fastest call of each
    kind is the fairest estimate of its cost. The cold first warmup is kept as ``first_wall_time_us``:
    what it took beyond the fastest warm call is the workload's first-call cost.
    """
    plain = list(warmup_walls_us[1:])
    if not plain or not run_walls_us:
        return None
    plain_us, captured_us = min(plain), min(run_walls_us)
    return {
        "plain_wall_time_us": plain_us,
        "captured_wall_time_us": captured_us,
        "ratio": captured_us / plain_us if plain_us > 0 else 1.0,
        "plain_samples": len(plain),
        "first_wall_time_us": warmup_walls_us[0],
    }


def overhead_warnings(overhead: dict[str, Any] | None) -> list[ProfileWarning]:
    if overhead is None or overhead["ratio"] <= OVERHEAD_WARN_RATIO:
        return []
    return [
        warning(
            "INSTRUMENTATION_OVERHEAD",
            f"the measured runs took {overhead['ratio'] - 1:.0%} longer than uninstrumented warmups "
            f"({overhead['captured_wall_time_us'] / 1000:.3f} ms vs {overhead['plain_wall_time_us'] / 1000:.3f} ms); "
            "region times are inflated by about as much — profile with a smaller max_depth, or accept it for "
            "workloads of many tiny operators (the profiler costs about 2 µs per operator).",
            "capture",
        )
    ]
