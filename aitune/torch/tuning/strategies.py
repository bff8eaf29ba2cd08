"""Tuning strategies: which candidate backends to try for one graph, and which one wins.

A strategy drives a ``Trial`` (build, gate, time) and returns the winning candidate, or None to keep
the original module. Every candidate it tried or skipped lands in the tuning report with its reason.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from aitune.compare.quality import check_precision
from aitune.errors import TuningError
from aitune.report.formatting import factor, whole_percent
from aitune.torch.backends import BACKENDS, Backend, precision_backends
from aitune.torch.tuning.budget import TimeBudget
from aitune.torch.tuning.collective import agreed_refusal
from aitune.torch.tuning.correctness import Tolerance
from aitune.torch.tuning.decision import FASTER, NOT_FASTER, Decision
from aitune.torch.tuning.measure import MeasureConfig
from aitune.torch.tuning.trial import Candidate, Trial


class TuneStrategy(ABC):
    """Base of the strategies: the candidates, the gate's tolerance, how to measure, and an optional time budget."""

    name: ClassVar[str]

    def __init__(
        self,
        backends: Sequence[Backend] | None = None,
        tolerance: Tolerance | None = None,
        measure: MeasureConfig | None = None,
        budget: TimeBudget | None = None,
        precision: str = "fp32",
    ) -> None:
        self.precision = check_precision(precision)  # fp32 unless asked: reduced levels are judged on the task
        self.backends = list(backends) if backends is not None else precision_backends(precision)
        self.tolerance = tolerance or Tolerance()
        self.measure = measure or MeasureConfig()
        self.budget = budget

    @abstractmethod
    def select(self, trial: Trial) -> Candidate | None:
        """The winning candidate of ``trial``, or None to run the original module."""

    def at_fp32(self) -> TuneStrategy:
        """A copy tuning at fp32 among this strategy's fp32 backends, sharing its time budget: what a region whose
        reduced-precision winner the task gate refused is tuned with again."""
        again = copy.copy(self)
        again.precision = "fp32"
        again.backends = [backend for backend in self.backends if backend.precision == "fp32"]
        return again

    def expect(self, values: Mapping[str, float]) -> None:
        """Each region's expected value (from suggest), so that the time budget is shared by it."""
        if self.budget is not None:
            self.budget.expect(values)

    def describe(self) -> dict[str, Any]:
        """JSON-ready settings for the tuning report."""
        return {
            "name": self.name,
            "backends": [b.to_dict() for b in self.backends],
            "tolerance": self.tolerance.to_dict(),
            "precision": self.precision,
            "budget": self.budget.describe() if self.budget is not None else None,
        }

    def _try(self, trial: Trial, backend: Backend, margin: float | None = None) -> Candidate:
        """Evaluate ``backend`` unless it is not offered or does not fit the budget (then skipped, with why)."""
        reason = trial.not_offered(backend)
        if reason is None and self.budget is not None:  # each rank reads its own clock: under torchrun they agree
            reason = agreed_refusal(self.budget.why_not(trial.region, backend.name), f"time budget of {backend.name}")
        if reason is not None:
            return trial.skip(backend, reason)
        if self.budget is None:
            return trial.evaluate(backend, margin)
        start = self.budget.clock()
        candidate = trial.evaluate(backend, margin)
        self.budget.record(backend.name, self.budget.clock() - start)
        return candidate


class OneBackendStrategy(TuneStrategy):
    """Use one backend, provided it builds and passes the correctness gate."""

    name = "one_backend"

    def __init__(
        self,
        backend: Backend,
        tolerance: Tolerance | None = None,
        measure: MeasureConfig | None = None,
        precision: str = "fp32",
    ):
        super().__init__([backend], tolerance, measure, precision=precision)

    def select(self, trial: Trial) -> Candidate | None:
        return trial.evaluate(self.backends[0]).win_if_passed()


class FirstWinsStrategy(TuneStrategy):
    """Try the backends in the given order; the first that builds and passes the gate wins (AITune's default)."""

    name = "first_wins"

    def select(self, trial: Trial) -> Candidate | None:
        for index, backend in enumerate(self.backends):
            winner = self._try(trial, backend).win_if_passed()
            if winner is not None:
                for later in self.backends[index + 1 :]:
                    trial.skip(later, f"not tried: {backend.name} won first")
                return winner
        return None


class MinLatencyStrategy(TuneStrategy):
    """Try every candidate; keep the fastest that passes the gate and beats eager by ``margin`` beyond noise.

    Each candidate is timed in rounds taking turns with eager until the interval of its paired speedup
    (`aitune.torch.tuning.decision`) clears ``1 / (1 - margin)`` or stays below it, or the timing caps are
    hit; a candidate whose interval still straddles it has "no significant difference" and eager stays.

    Only the best candidate so far stays alive: every other one is freed right after it is measured
    (keeping all of them peaked at 7.6 GB RSS on BERT). With a time budget (``budget``, or
    ``time_budget_s`` counted from when the strategy is made), backends go in the budget's order of
    expected gain per second and those that do not fit are skipped with the reason.
    """

    name = "min_latency"

    def __init__(
        self,
        backends: Sequence[Backend] | None = None,
        margin: float = 0.05,
        time_budget_s: float | None = None,
        tolerance: Tolerance | None = None,
        measure: MeasureConfig | None = None,
        budget: TimeBudget | None = None,
        precision: str = "fp32",
    ) -> None:
        if budget is None and time_budget_s is not None:
            budget = TimeBudget(time_budget_s)
        super().__init__(backends, tolerance, measure, budget, precision)
        self.margin = margin

    @property
    def time_budget_s(self) -> float | None:
        return self.budget.total_s if self.budget is not None else None

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "margin": self.margin, "time_budget_s": self.time_budget_s}

    def select(self, trial: Trial) -> Candidate | None:
        order = self.budget.order(self.backends, lambda b: b.name) if self.budget is not None else self.backends
        best: Candidate | None = None
        for backend in order:
            candidate = self._try(trial, backend, self.margin)
            if not candidate.passed:
                continue
            lost = self._not_a_win(candidate.decision)
            if lost is not None:
                candidate.reject(lost)
            elif best is None or _speedup(candidate) > _speedup(best):
                if best is not None:
                    _reject_slower(best, candidate)
                best = candidate
            else:
                _reject_slower(candidate, best)
        return best.win_if_passed() if best is not None else None

    def _not_a_win(self, decision: Decision | None) -> str | None:
        """None for a win beyond noise; else why eager stays."""
        if decision is None:
            return "not timed against eager"
        if decision.verdict == FASTER:
            return None
        needed = factor(decision.needed)
        if decision.interval is None:
            return f"no significant difference: too few paired rounds for an interval (needs > {needed})"
        if decision.verdict == NOT_FASTER:
            return f"not {whole_percent(self.margin)} faster than eager ({decision.interval.text()}, needs > {needed})"
        return (
            f"no significant difference: {decision.interval.text()}; the interval's lower end does not clear "
            f"{needed} ({whole_percent(self.margin)} faster), so eager stays"
        )


def _reject_slower(loser: Candidate, winner: Candidate) -> None:
    versus = f"{factor(_speedup(loser))} vs {factor(_speedup(winner))} over eager"
    loser.reject(f"slower than {winner.backend.name} ({versus})")


def _speedup(candidate: Candidate) -> float:
    """The median paired speedup when decided, else the ratio of medians."""
    interval = candidate.decision.interval if candidate.decision is not None else None
    return interval.speedup if interval is not None else candidate.speedup or 0.0


def default_strategy() -> TuneStrategy:
    """Min-latency over the default backends: a tuned module is never slower than eager on the recorded calls."""
    return MinLatencyStrategy()


STRATEGIES: dict[str, type[TuneStrategy]] = {
    "min-latency": MinLatencyStrategy,
    "first-wins": FirstWinsStrategy,
}
"""The strategies the command line names; one-backend is ``min-latency`` with a single backend."""


def named_strategy(
    name: str,
    backends: Sequence[str] | None = None,
    tolerance: Tolerance | None = None,
    time_budget_s: float | None = None,
    budget: TimeBudget | None = None,
    precision: str = "fp32",
) -> TuneStrategy:
    """A strategy built from command-line words, e.g. ``named_strategy("min-latency", ["onnxruntime"])``.

    ``budget`` (or ``time_budget_s``, counted from now) bounds the tuning; ``precision`` the level tuned
    at (its backends when none are named); `TuningError` names the unknown strategy or backend and lists
    the known ones.
    """
    if budget is None and time_budget_s is not None:
        budget = TimeBudget(time_budget_s)
    kind = STRATEGIES.get(name)
    if kind is None:
        raise TuningError(f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}.")
    unknown = [backend for backend in backends or () if backend not in BACKENDS]
    if unknown:
        raise TuningError(f"unknown backend {unknown[0]!r}; choose from {', '.join(BACKENDS)}.")
    chosen = [BACKENDS[backend]() for backend in backends] if backends else None
    if kind is MinLatencyStrategy:
        return MinLatencyStrategy(chosen, tolerance=tolerance, budget=budget, precision=precision)
    return kind(chosen, tolerance=tolerance, budget=budget, precision=precision)
