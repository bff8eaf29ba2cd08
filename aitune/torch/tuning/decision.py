"""Whether a candidate beats eager beyond noise: a rule over two lists of paired timings (no torch, no clock).

Eager and the candidate are timed in turns, so round i of each saw the same machine. The rule works on
the per-round ratios ``eager_i / candidate_i``: their median is the speedup, and a distribution-free
interval for that median at the one confidence every stage states
(`aitune.analysis.statistics.paired_speedup_figure`, 95%) says how sure it is.

A candidate is ``faster`` when the interval's lower end clears ``1 / (1 - margin)``, ``not_faster`` when
its upper end stays below it, and ``undecided`` otherwise — more rounds, or at the end "no significant
difference", which keeps eager.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aitune.analysis.statistics import CONFIDENCE, paired_speedup_figure
from aitune.report.formatting import factor

FASTER, NOT_FASTER, UNDECIDED = "faster", "not_faster", "undecided"


@dataclass(frozen=True)
class SpeedupInterval:
    """The median per-round speedup (eager ÷ candidate), its interval and how many paired rounds made it."""

    speedup: float
    low: float
    high: float
    rounds: int
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "speedup": round(self.speedup, 4),
            "low": round(self.low, 4),
            "high": round(self.high, 4),
            "rounds": self.rounds,
            "confidence": self.confidence,
        }

    def text(self) -> str:
        return f"{factor(self.speedup, self.low, self.high)} over {self.rounds} paired rounds"


@dataclass(frozen=True)
class Decision:
    """``faster``, ``not_faster`` or ``undecided`` against the speedup ``needed``; ``interval`` is None below
    the rounds an interval needs."""

    verdict: str
    needed: float
    interval: SpeedupInterval | None

    @property
    def settled(self) -> bool:
        return self.verdict != UNDECIDED


def needed_speedup(margin: float) -> float:
    """The speedup a candidate must beat: being ``margin`` faster means taking ``1 - margin`` of eager's time."""
    return 1.0 / (1.0 - margin)


def paired_speedup(eager_us: Sequence[float], candidate_us: Sequence[float]) -> SpeedupInterval | None:
    """The median of ``eager_i / candidate_i`` with its `CONFIDENCE` interval; None with too few rounds for one
    (rounds with a non-positive time on either side dropped; 6 rounds are the fewest at 95%)."""
    figure = paired_speedup_figure(eager_us, candidate_us)
    if figure is None or not figure.at_confidence:
        return None
    return SpeedupInterval(figure.median, figure.low, figure.high, figure.rounds, CONFIDENCE)


def decide(eager_us: Sequence[float], candidate_us: Sequence[float], margin: float) -> Decision:
    """The verdict on paired timings: ``faster`` only when the interval's lower end exceeds ``1 / (1 - margin)``."""
    needed = needed_speedup(margin)
    interval = paired_speedup(eager_us, candidate_us)
    if interval is None:
        return Decision(UNDECIDED, needed, None)
    if interval.low > needed:
        return Decision(FASTER, needed, interval)
    if interval.high < needed:
        return Decision(NOT_FASTER, needed, interval)
    return Decision(UNDECIDED, needed, interval)
