"""End-to-end verification of tuned regions: which of them make the whole run faster, beyond noise (no torch).

Two captures taken a minute apart differ by drift alone (15% on a model where nothing was tuned),
so the verdict is never a comparison of captures. It alternates whole runs of two configurations
in one process, round by round (A B, then B A, so neither order nor drift favours one side), and
judges the per-round ratios: the speedup of a round is the time without ÷ the time with, its
median the figure, and a distribution-free interval of that median at the one stated confidence
(`aitune.analysis.statistics.paired_speedup_figure`, 95%; the whole range below 6 rounds) the noise
around it. A configuration wins only when the interval's low end is above ``1 + margin``.

`verify_regions` applies it to a set of tuned regions: with several, each region's contribution is
checked first (the run with every kept region against the run without this one; a region whose
removal does not make the run slower is dropped, greedily, in the given order), then the kept set
against eager. Anything that does not win is put back by the caller. The measurement is a callable
``measure(enabled) -> µs`` that times one whole run with exactly the regions in ``enabled`` tuned,
so the logic here is tested with synthetic timings; the torch adapter is
`aitune.torch.tuning.verify`.

A workload whose calls differ (rotating prompts, lengths, batches) repeats every ``VerifyConfig.cycle``
calls: ``measure`` then times one whole cycle, call by call, on each side, so the two sides of a round see
the same calls and the interval measures the backend, not the inputs; each call of the cycle gets its
own paired figure too (`PairedSpeedup.per_call`), the verdict per shape where shapes differ.

Bounded: at most ``len(paths) + 1`` comparisons (one per region's contribution while several are
kept, one against eager) of at most ``max_rounds`` rounds (two runs each) plus one warm run per
side; a ``deadline`` (on ``clock``) stops any comparison once it has its ``min_rounds``, and skips
the per-region checks once it has passed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from aitune.analysis.statistics import paired_speedup_figure
from aitune.report.formatting import factor

Measure = Callable[[frozenset[str]], Sequence[float]]
"""Times one cycle of whole runs (µs per call, one call unless the workload's calls repeat every few calls) with
exactly these regions tuned, the others running their original code."""


@dataclass(frozen=True)
class VerifyConfig:
    """How hard to look: rounds per comparison (each round runs both sides once) and the margin a win must clear."""

    min_rounds: int = 6
    max_rounds: int = 20
    margin: float = 0.01  # a win is an interval whose low end is above 1 + margin
    cycle: int = 1  # calls of the workload per side and round: its calls repeat every `cycle` calls


@dataclass(frozen=True)
class PairedSpeedup:
    """Time without ÷ time with, over paired rounds: the median ratio and its 95% interval (`paired_speedup`); with a
    cycle of differing calls, the same figure for each call of the cycle (``per_call``, in the cycle's order)."""

    rounds: int
    median: float
    ci_low: float
    ci_high: float
    per_call: tuple[PairedSpeedup, ...] = ()

    def faster(self, margin: float) -> bool:
        """True when the interval lies above ``1 + margin``: faster beyond noise."""
        return self.ci_low > 1 + margin

    def settled(self, margin: float) -> bool:
        """True when more rounds cannot change the verdict much: a win, or an interval below ``1 + margin``."""
        return self.faster(margin) or self.ci_high < 1 + margin

    def outruns(self, other: PairedSpeedup) -> bool:
        """True when this interval lies wholly above ``other``'s: faster than it beyond the noise of both (two
        figures each measured against eager, one after the other, are compared no closer than that)."""
        return self.ci_low > other.ci_high

    def shown(self) -> str:
        """``0.73× [0.63, 0.92] over 12 rounds``."""
        return f"{factor(self.median, self.ci_low, self.ci_high)} over {self.rounds} rounds"

    def per_call_shown(self) -> str | None:
        """``call 1 of 3: 1.30× [1.25, 1.36]; call 2 of 3: …`` where the cycle had several calls, else None."""
        if not self.per_call:
            return None
        count = len(self.per_call)
        return "; ".join(
            f"call {index} of {count}: {factor(call.median, call.ci_low, call.ci_high)}"
            for index, call in enumerate(self.per_call, 1)
        )


END_TO_END = "end to end"  # the region (or set) was weighed against the run with nothing tuned
CONTRIBUTION = "its contribution"  # against the run with the other kept regions only
CAPTURES = "the captures"  # the capture after tuning against the one before: slower beyond noise
OUTRUN = "outrun by the other candidate"  # won against eager, but another way of tuning won by more
COMPARISONS = (END_TO_END, CONTRIBUTION, CAPTURES, OUTRUN)


@dataclass(frozen=True)
class RegionCheck:
    """One region's verdict: kept or put back, on which comparison (`END_TO_END`, `CONTRIBUTION`, `CAPTURES`,
    `OUTRUN`), with its figures."""

    path: str
    kept: bool
    compared: str
    speedup: PairedSpeedup

    def line(self, backend: str) -> str:
        """``encoder: onnxruntime put back: end to end 0.73× [0.63, 0.92] over 12 rounds``."""
        return f"{self.path or '(whole model)'}: {self.verdict(backend)}"

    def verdict(self, backend: str) -> str:
        """``onnxruntime put back: end to end 0.73× [0.63, 0.92] over 12 rounds``."""
        return f"{backend} {self.judged()}"

    def judged(self) -> str:
        """``put back: end to end 0.73× [0.63, 0.92] over 12 rounds``. An `OUTRUN` figure is the region's own end
        to end, so it is labelled as such: it is not the margin the other candidate won by."""
        if self.compared == OUTRUN:
            return f"put back: {OUTRUN}, which ran faster end to end (this one {self.speedup.shown()})"
        return f"{'kept' if self.kept else 'put back'}: {self.compared} {self.speedup.shown()}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Verification:
    """Every region's check, in the order given, and the kept set against eager (None when nothing was kept)."""

    checks: list[RegionCheck]
    end_to_end: PairedSpeedup | None

    @property
    def kept(self) -> list[str]:
        return [check.path for check in self.checks if check.kept]

    @property
    def put_back(self) -> list[str]:
        return [check.path for check in self.checks if not check.kept]

    def to_dict(self) -> dict[str, Any]:
        return {
            "regions": [check.to_dict() for check in self.checks],
            "end_to_end": asdict(self.end_to_end) if self.end_to_end is not None else None,
        }


MAX_CYCLE = 64
"""The most calls a cycle may have: each is timed on both sides of every round."""


def paired_speedup(without_us: Sequence[float], with_us: Sequence[float]) -> PairedSpeedup:
    """The per-round ratios ``without ÷ with`` (rounds paired by index) as a `PairedSpeedup`.

    >>> paired_speedup([10.0] * 6, [5.0] * 6)
    PairedSpeedup(rounds=6, median=2.0, ci_low=2.0, ci_high=2.0, per_call=())
    """
    figure = paired_speedup_figure(without_us, with_us)
    if figure is None:
        raise ValueError("paired_speedup needs at least one round with a positive time on both sides")
    return PairedSpeedup(figure.rounds, figure.median, figure.low, figure.high)


def compare_sets(
    measure: Measure,
    without: frozenset[str],
    with_: frozenset[str],
    config: VerifyConfig,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> PairedSpeedup:
    """How much faster the run is with ``with_`` tuned than with ``without``: alternating rounds, A B then B A.

    One warm run of each side first (a backend's first call, caches); then rounds until the verdict
    is settled after ``min_rounds``, ``max_rounds`` are done, or ``deadline`` (on ``clock``) has passed.
    """
    measure(without)
    measure(with_)
    times: tuple[list[Sequence[float]], list[Sequence[float]]] = ([], [])
    speedup: PairedSpeedup | None = None
    for index in range(max(config.max_rounds, config.min_rounds, 1)):
        order = (0, 1) if index % 2 == 0 else (1, 0)
        for side in order:
            times[side].append(measure((without, with_)[side]))
        if index + 1 < config.min_rounds:
            continue
        speedup = paired_speedup(*([sum(calls) for calls in side] for side in times))
        if speedup.settled(config.margin) or (deadline is not None and clock() >= deadline):
            break
    return _with_calls(speedup or paired_speedup(*([sum(calls) for calls in side] for side in times)), times)


def _with_calls(speedup: PairedSpeedup, times: tuple[list[Sequence[float]], list[Sequence[float]]]) -> PairedSpeedup:
    """``speedup`` with each call of the cycle paired on its own, where the rounds timed more than one call."""
    counts = {len(calls) for side in times for calls in side}
    count = max(counts)
    if len(counts) > 1 or count < 2:
        return speedup
    per_call = tuple(
        paired_speedup([calls[index] for calls in times[0]], [calls[index] for calls in times[1]])
        for index in range(count)
    )
    return PairedSpeedup(speedup.rounds, speedup.median, speedup.ci_low, speedup.ci_high, per_call)


def verify_regions(
    paths: Sequence[str],
    measure: Measure,
    config: VerifyConfig | None = None,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Verification:
    """Which of the tuned ``paths`` make the whole run faster beyond noise (see the module docstring).

    With several paths, each one's contribution is checked in the given order while more than one is
    kept (skipped once ``deadline`` has passed); then the kept set is weighed against eager, and if
    it does not win, every kept path is put back with that end-to-end figure.
    """
    config = config or VerifyConfig()
    kept = list(dict.fromkeys(paths))
    checks: dict[str, RegionCheck] = {}
    for path in list(kept) if len(kept) > 1 else ():
        if len(kept) == 1 or (deadline is not None and clock() >= deadline):
            break
        speedup = compare_sets(measure, frozenset(kept) - {path}, frozenset(kept), config, deadline, clock)
        checks[path] = RegionCheck(path, speedup.faster(config.margin), CONTRIBUTION, speedup)
        if not checks[path].kept:
            kept.remove(path)
    end_to_end = compare_sets(measure, frozenset(), frozenset(kept), config, deadline, clock) if kept else None
    if end_to_end is not None:
        wins = end_to_end.faster(config.margin)
        for path in kept:
            if not wins or path not in checks:
                checks[path] = RegionCheck(path, wins, END_TO_END, end_to_end)
    return Verification([checks[path] for path in dict.fromkeys(paths)], end_to_end)


def captured_loss(ratio: float | None, ci_low: float | None, ci_high: float | None, runs: int) -> PairedSpeedup | None:
    """The captures' speedup (before ÷ after) when the run after tuning was slower beyond noise: the 95%
    interval of compare's after ÷ before ``ratio`` lies above 1. None otherwise (or without an interval).

    The verdict alternates runs and is the better evidence, but the captures are what a user reads:
    a tuning the captures show slower is put back whole, whatever the check said (never slower).

    >>> loss = captured_loss(1.3, 1.1, 1.5, runs=10)
    >>> (loss.rounds, round(loss.median, 3), round(loss.ci_low, 3), round(loss.ci_high, 3))
    (10, 0.769, 0.667, 0.909)
    >>> captured_loss(1.3, 0.9, 1.5, runs=10) is None
    True
    """
    if ratio is None or ci_low is None or ci_high is None or ci_low <= 1.0 or ratio <= 0:
        return None
    return PairedSpeedup(runs, 1 / ratio, 1 / ci_high, 1 / ci_low)
