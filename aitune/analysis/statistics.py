"""Statistics over measured runs: summaries, outlier runs, the warnings they justify, and the two intervals
every stage states at one `CONFIDENCE`: the bootstrap interval of a ratio of medians (two captures) and the
distribution-free interval of a paired speedup (alternating rounds: tuning's decision and verification).

Percentiles interpolate linearly between order statistics (numpy's default), so a hand
computation on a short list gives the same numbers.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypedDict

from aitune.analysis.shares import fraction
from aitune.analysis.warnings import ProfileWarning, warning

if TYPE_CHECKING:
    import numpy as np

    from aitune.analysis.attribution import AttributedRun

BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95
"""Two-sided coverage of every interval aitune states: a capture's comparison, a backend's decision, a verification."""
SEED = 0

OUTLIER_MADS = 3.0
"""A run is an outlier when it lies more than this many MADs from the median …"""

OUTLIER_MIN_DEVIATION = 0.10
"""… and more than this fraction of the median from it. On a quiet machine the runs of a steady
workload lie within a percent or two of each other, so 3 MADs alone flag runs 2% slow: a warning
that fires on every capture. A run 10% off the others is one worth looking at in the trace."""

HIGH_CV = 0.10
"""A robust coefficient of variation (1.4826 × MAD ÷ median, the std of normal noise) above this
earns a warning: the runs as a whole spread too much for their median to be trusted. Robust, so one
slow run, which `RUN_OUTLIERS` names and which moves the median by nothing, does not raise it too."""

_MAD_TO_STD = 1.4826


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
    """Indices of values more than ``mads`` median absolute deviations and `OUTLIER_MIN_DEVIATION` of
    the median away from the median.

    >>> outlier_indices([10.0, 10.2, 9.9, 10.1, 30.0]), outlier_indices([100.0, 100.2, 99.9, 100.1, 103.0])
    ([4], [])
    """
    if len(values) < 3:
        return []
    median = statistics.median(values)
    mad = statistics.median(abs(value - median) for value in values)
    limit = max(mads * mad, OUTLIER_MIN_DEVIATION * abs(median))
    return [index for index, value in enumerate(values) if abs(value - median) > limit]


def robust_cv(values: Sequence[float]) -> float:
    """1.4826 × MAD ÷ median: the coefficient of variation of normal noise, unmoved by a few outliers."""
    median = statistics.median(values)
    if not median:
        return 0.0
    return _MAD_TO_STD * statistics.median(abs(value - median) for value in values) / abs(median)


def run_time_warnings(name: str, values: Sequence[float], source: str = "statistics") -> list[ProfileWarning]:
    """RUN_OUTLIERS (with run indices) and HIGH_RUN_VARIANCE for one run-time series."""
    found: list[ProfileWarning] = []
    outliers = outlier_indices(values)
    if outliers:
        median = statistics.median(values)
        found.append(
            warning(
                "RUN_OUTLIERS",
                f"run(s) {', '.join(map(str, outliers))} have a {name} more than {OUTLIER_MADS:g} MADs and "
                f"{OUTLIER_MIN_DEVIATION:.0%} from the median ({median / 1000:.3f} ms); something else ran on the "
                "machine or the workload varies — "
                "look at those runs in the trace, or add warmup runs.",
                source,
            )
        )
    spread = robust_cv(values) if len(values) >= 3 else 0.0
    if spread > HIGH_CV:
        found.append(
            warning(
                "HIGH_RUN_VARIANCE",
                f"the {name} varies by {spread:.0%} (robust coefficient of variation) across {len(values)} runs; "
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

STEADY_WINDOW = 2
"""Warmups are steady when the last this many calls are, at median, no faster than the this many before."""

STEADY_TOLERANCE = 0.03
"""… by more than this fraction: a run time still falling faster than that is still warming up."""

MAX_EXTRA_WARMUPS = 10
"""A capture adds at most this many warmups beyond the requested ones waiting for steady run times."""


def is_steady(walls_us: Sequence[float], window: int = STEADY_WINDOW, tolerance: float = STEADY_TOLERANCE) -> bool:
    """Whether a series of warmup wall times has stopped falling: the median of the last ``window``
    calls is at least ``1 - tolerance`` times the median of the ``window`` calls before them.

    Only a fall counts: noise that makes a call slower says nothing about warming up.

    >>> is_steady([900.0, 300.0, 120.0, 100.0]), is_steady([300.0, 120.0, 100.0, 101.0, 99.0, 100.0])
    (False, True)
    """
    if len(walls_us) < 2 * window:
        return False
    recent = statistics.median(walls_us[-window:])
    before = statistics.median(walls_us[-2 * window : -window])
    return recent >= (1 - tolerance) * before


def starts_steady(
    run_walls_us: Sequence[float], window: int = STEADY_WINDOW, tolerance: float = STEADY_TOLERANCE
) -> bool:
    """Whether measured runs start at their steady time: the runs after the first ``window`` are, at
    median, no faster than ``1 - tolerance`` times the first ``window``. Too few runs to tell: True.

    The measured runs decide whether the warmups were enough, so a capture needs no warmups beyond
    the requested ones to find out (a run still falling is set aside as a warmup, see `capture_trace`).

    >>> starts_steady([150.0, 120.0, 100.0, 100.0]), starts_steady([100.0, 101.0, 99.0, 100.0])
    (False, True)
    """
    if len(run_walls_us) <= window:
        return True
    first = statistics.median(run_walls_us[:window])
    return statistics.median(run_walls_us[window:]) >= (1 - tolerance) * first


def warmup_summary(walls_us: Sequence[float], requested: int, run_walls_us: Sequence[float] = ()) -> dict[str, Any]:
    """The ``warmup`` section: calls requested and performed, whether the run time was steady after
    them (the warmups had stopped falling, or the measured runs did not start falling), their wall µs."""
    return {
        "requested": requested,
        "performed": len(walls_us),
        "steady": is_steady(walls_us) or (bool(run_walls_us) and starts_steady(run_walls_us)),
        "wall_times_us": list(walls_us),
    }


def capture_overhead(
    warmup_walls_us: Sequence[float], run_walls_us: Sequence[float], plain_walls_us: Sequence[float] = ()
) -> dict[str, Any] | None:
    """Median measured run ÷ median warm uninstrumented warmup, with a 95% bootstrap interval; None without one.

    The plain sample is the warmups from the steady window on (the last ``2 × STEADY_WINDOW``, or all
    but the cold first when fewer): earlier calls still carry first-call costs, and a minimum of either
    side reads a lucky call, not the typical one. Medians of both sides are right on average (one
    preempted call moves neither), and the interval says how far noise can move the ratio. The cold
    first warmup is kept as ``first_wall_time_us``: what it took beyond the warm calls is the
    workload's first-call cost. ``plain_walls_us``, when given, is the plain sample instead: plain
    calls made after the measured runs because the warmups ended before the run time was steady.
    """
    plain = list(plain_walls_us) or list(warmup_walls_us[1:][-2 * STEADY_WINDOW :])
    if not plain or not run_walls_us or not warmup_walls_us:
        return None
    plain_us, captured_us = statistics.median(plain), statistics.median(run_walls_us)
    overhead = {
        "plain_wall_time_us": plain_us,
        "captured_wall_time_us": captured_us,
        "ratio": captured_us / plain_us if plain_us > 0 else 1.0,
        "plain_samples": len(plain),
        "first_wall_time_us": warmup_walls_us[0],
    }
    enough = len(plain) >= 2 and len(run_walls_us) >= 2
    low, high = bootstrap_ratio_interval(plain, run_walls_us) if enough else (None, None)
    if low is not None and high is not None:
        overhead["ratio_low"], overhead["ratio_high"] = low, high
    return overhead


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


@dataclass(frozen=True)
class PairedSpeedupFigure:
    """How much faster one side ran than the other over paired rounds: the median of the per-round ratios and the
    distribution-free interval of that median; ``at_confidence`` is False where the rounds are too few for an
    interval at `CONFIDENCE` (fewer than 6), and the interval is then their whole range."""

    median: float
    low: float
    high: float
    rounds: int
    at_confidence: bool


def paired_speedup_figure(reference_us: Sequence[float], other_us: Sequence[float]) -> PairedSpeedupFigure | None:
    """The ratios ``reference_i ÷ other_i`` of rounds timed in turns (paired by index; a round with a time that
    is not positive on either side is dropped): their median, and the interval ``[r_(k), r_(n+1-k)]`` of the
    sorted ratios with the largest ``k`` whose sign-test tail ``P(Bin(n, ½) < k)`` is at most
    ``(1 - CONFIDENCE) / 2``. No normality is assumed: one preempted round moves one ratio, not the interval's
    ends. None without a round.

    >>> paired_speedup_figure([10.0] * 6, [5.0] * 6)
    PairedSpeedupFigure(median=2.0, low=2.0, high=2.0, rounds=6, at_confidence=True)
    """
    ratios = sorted(r / o for r, o in zip(reference_us, other_us, strict=True) if r > 0 and o > 0)
    if not ratios:
        return None
    k = median_rank(len(ratios))
    low, high = (ratios[k - 1], ratios[-k]) if k else (ratios[0], ratios[-1])
    return PairedSpeedupFigure(statistics.median(ratios), low, high, len(ratios), k > 0)


def median_rank(n: int) -> int:
    """The rank ``k`` of the `CONFIDENCE` interval ``[x_(k), x_(n+1-k)]`` of the median of ``n`` values: the largest
    ``k ≤ n/2`` with ``P(Bin(n, ½) ≤ k - 1) ≤ (1 - CONFIDENCE) / 2``, or 0 where ``n`` is too small for any.

    >>> median_rank(20), median_rank(6), median_rank(5)
    (6, 1, 0)
    """
    tail = (1 - CONFIDENCE) / 2
    k, cumulative = 0, 0.0
    while k < n // 2:
        cumulative += math.comb(n, k) / 2.0**n
        if cumulative > tail:
            break
        k += 1
    return k


def bootstrap_ratio_interval(
    before: Sequence[float], after: Sequence[float], resamples: int = BOOTSTRAP_RESAMPLES, seed: int = SEED
) -> tuple[float | None, float | None]:
    """Percentile bootstrap interval (`CONFIDENCE`) of median(after) ÷ median(before); deterministic."""
    import numpy as np  # here, as in `resample_indices`: the summaries a document's readers use need no numpy

    old_draws, new_draws = resample_indices(len(before), len(after), resamples, seed)
    old = _row_medians(np.asarray(before, dtype=float)[old_draws])
    new = _row_medians(np.asarray(after, dtype=float)[new_draws])
    kept = old > 0
    ratios = np.sort(new[kept] / old[kept]).tolist()
    if not ratios:
        return None, None
    tail = (1 - CONFIDENCE) / 2
    return _quantile(ratios, tail), _quantile(ratios, 1 - tail)


@lru_cache(maxsize=16)
def resample_indices(before_n: int, after_n: int, resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Which runs each bootstrap resample draws on each side: two read-only ``resamples × n`` index arrays.

    The draws of `random.Random(seed).choices`, alternating before and after per resample, so the
    resamples do not depend on numpy's generators and stay the same across numpy versions. They are
    made in bulk (a Python loop took ~90 ms, more than the rest of ``compare``): ``choices`` picks
    ``floor(random() × n)``, and numpy's legacy ``RandomState`` (MT19937, its stream frozen by numpy's
    compatibility policy) started from Python's generator state gives the same ``random()`` doubles;
    ``tests/test_compare.py`` checks they agree.
    """
    import numpy as np

    _, state, _ = random.Random(seed).getstate()
    generator = np.random.RandomState()
    generator.set_state(("MT19937", np.array(state[:-1], dtype=np.uint32), state[-1]))
    uniform = generator.random_sample((resamples, before_n + after_n))
    old = np.floor(uniform[:, :before_n] * before_n).astype(np.intp)
    new = np.floor(uniform[:, before_n:] * after_n).astype(np.intp)
    for array in (old, new):
        array.flags.writeable = False  # shared by every caller through the cache
    return old, new


def _row_medians(rows: np.ndarray) -> np.ndarray:
    """Each row's median, as ``np.median(rows, axis=1)`` gives it (the mean of the middle two of an even
    row), from one sort: several times faster than ``np.median`` on resamples of a few dozen runs."""
    import numpy as np

    ordered = np.sort(rows, axis=1)
    middle = ordered.shape[1] // 2
    if ordered.shape[1] % 2:
        return ordered[:, middle]
    return (ordered[:, middle - 1] + ordered[:, middle]) / 2


def _quantile(ordered: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of an already sorted, non-empty sequence."""
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
