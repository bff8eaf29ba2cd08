"""Tuning strategies: which candidate backends to try for one graph, and which one wins.

A strategy drives a ``Trial`` (build, gate, time) and returns the winning candidate, or None to keep
the original module. Every candidate it tried or skipped lands in the tuning report with its reason.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from aitune.errors import TuningError
from aitune.torch.backends import BACKENDS, Backend, default_backends
from aitune.torch.tuning.correctness import Tolerance
from aitune.torch.tuning.measure import MeasureConfig
from aitune.torch.tuning.trial import Candidate, Trial


class TuneStrategy(ABC):
    """Base of the strategies: the candidates, the gate's tolerance and how to measure."""

    name: ClassVar[str]

    def __init__(
        self,
        backends: Sequence[Backend] | None = None,
        tolerance: Tolerance | None = None,
        measure: MeasureConfig | None = None,
    ) -> None:
        self.backends = list(backends) if backends is not None else default_backends()
        self.tolerance = tolerance or Tolerance()
        self.measure = measure or MeasureConfig()

    @abstractmethod
    def select(self, trial: Trial) -> Candidate | None:
        """The winning candidate of ``trial``, or None to run the original module."""

    def describe(self) -> dict[str, Any]:
        """JSON-ready settings for the tuning report."""
        return {
            "name": self.name,
            "backends": [b.to_dict() for b in self.backends],
            "tolerance": self.tolerance.to_dict(),
        }


class OneBackendStrategy(TuneStrategy):
    """Use one backend, provided it builds and passes the correctness gate."""

    name = "one_backend"

    def __init__(self, backend: Backend, tolerance: Tolerance | None = None, measure: MeasureConfig | None = None):
        super().__init__([backend], tolerance, measure)

    def select(self, trial: Trial) -> Candidate | None:
        return trial.evaluate(self.backends[0]).win_if_passed()


class FirstWinsStrategy(TuneStrategy):
    """Try the backends in order; the first that builds and passes the gate wins (AITune's default)."""

    name = "first_wins"

    def select(self, trial: Trial) -> Candidate | None:
        for index, backend in enumerate(self.backends):
            winner = trial.evaluate(backend).win_if_passed()
            if winner is not None:
                for later in self.backends[index + 1 :]:
                    trial.skip(later, f"not tried: {backend.name} won first")
                return winner
        return None


class MinLatencyStrategy(TuneStrategy):
    """Build and time every candidate; keep the fastest that passes the gate and beats eager by ``margin``.

    Only the best candidate so far stays alive: every other one is freed right after it is measured
    (keeping all of them peaked at 7.6 GB RSS on BERT). ``time_budget_s`` caps the total build time:
    once spent, the remaining candidates are skipped.
    """

    name = "min_latency"

    def __init__(
        self,
        backends: Sequence[Backend] | None = None,
        margin: float = 0.05,
        time_budget_s: float | None = None,
        tolerance: Tolerance | None = None,
        measure: MeasureConfig | None = None,
    ) -> None:
        super().__init__(backends, tolerance, measure)
        self.margin = margin
        self.time_budget_s = time_budget_s

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "margin": self.margin, "time_budget_s": self.time_budget_s}

    def select(self, trial: Trial) -> Candidate | None:
        needed = 1.0 / (1.0 - self.margin)
        best: Candidate | None = None
        for backend in self.backends:
            if self.time_budget_s is not None and trial.build_seconds >= self.time_budget_s:
                trial.skip(backend, f"not tried: the tuning time budget of {self.time_budget_s:g} s is spent")
                continue
            candidate = trial.evaluate(backend)
            if not candidate.passed:
                continue
            # Speedups, not latencies: each candidate was timed in turns with eager, so drift cancels.
            speedup = candidate.speedup or 0.0
            if speedup < needed:
                candidate.reject(f"not {self.margin:.0%} faster than eager ({speedup:.2f}× timed side by side)")
            elif best is None or speedup > (best.speedup or 0.0):
                if best is not None:
                    best.reject(f"slower than {backend.name} ({best.speedup:.2f}× vs {speedup:.2f}× over eager)")
                best = candidate
            else:
                candidate.reject(f"slower than {best.backend.name} ({speedup:.2f}× vs {best.speedup:.2f}× over eager)")
        return best.win_if_passed() if best is not None else None


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
) -> TuneStrategy:
    """A strategy built from command-line words, e.g. ``named_strategy("min-latency", ["onnxruntime"])``.

    `TuningError` names the unknown strategy or backend and lists the known ones.
    """
    kind = STRATEGIES.get(name)
    if kind is None:
        raise TuningError(f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}.")
    unknown = [backend for backend in backends or () if backend not in BACKENDS]
    if unknown:
        raise TuningError(f"unknown backend {unknown[0]!r}; choose from {', '.join(BACKENDS)}.")
    chosen = [BACKENDS[backend]() for backend in backends] if backends else None
    if kind is MinLatencyStrategy:
        return MinLatencyStrategy(chosen, time_budget_s=time_budget_s, tolerance=tolerance)
    return kind(chosen, tolerance=tolerance)
