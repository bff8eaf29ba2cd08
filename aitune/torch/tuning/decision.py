"""Whether a candidate beats eager beyond noise: a rule over two lists of paired timings (no torch, no clock).

Eager and the candidate are timed in turns, so round i of each saw the same machine. The rule works on
the per-round ratios ``eager_i / candidate_i``: their median is the speedup, and a distribution-free
interval for that median (order statistics of the ratios, sign-test coverage) says how sure it is.
No normality is assumed: one preempted round moves one ratio, not the interval's ends.

A candidate is ``faster`` when the interval's lower end clears ``1 / (1 - margin)``, ``not_faster`` when
its upper end stays below it, and ``undecided`` otherwise — more rounds, or at the end "no significant
difference", which keeps eager.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

CONFIDENCE = 0.90
"""Two-sided coverage of the interval: each end is a one-sided 95% bound."""

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
        return f"{self.speedup:.2f}× [{self.low:.2f}, {self.high:.2f}] over {self.rounds} paired rounds"


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


def paired_speedup(
    eager_us: Sequence[float], candidate_us: Sequence[float], confidence: float = CONFIDENCE
) -> SpeedupInterval | None:
    """The median of ``eager_i / candidate_i`` with its order-statistic interval; None with too few rounds.

    Rounds with a non-positive time on either side are dropped. The interval is ``[r_(k), r_(n+1-k)]`` of
    the sorted ratios, with the largest ``k`` whose sign-test tail ``P(Bin(n, ½) < k)`` is at most
    ``(1 - confidence) / 2``; with fewer rounds than that needs (5 at 90%), there is no interval.
    """
    ratios = sorted(e / c for e, c in zip(eager_us, candidate_us, strict=False) if e > 0 and c > 0)
    k = _order_index(len(ratios), (1.0 - confidence) / 2.0)
    if k == 0:
        return None
    return SpeedupInterval(statistics.median(ratios), ratios[k - 1], ratios[-k], len(ratios), confidence)


def decide(
    eager_us: Sequence[float], candidate_us: Sequence[float], margin: float, confidence: float = CONFIDENCE
) -> Decision:
    """The verdict on paired timings: ``faster`` only when the interval's lower end exceeds ``1 / (1 - margin)``."""
    needed = needed_speedup(margin)
    interval = paired_speedup(eager_us, candidate_us, confidence)
    if interval is None:
        return Decision(UNDECIDED, needed, None)
    if interval.low > needed:
        return Decision(FASTER, needed, interval)
    if interval.high < needed:
        return Decision(NOT_FASTER, needed, interval)
    return Decision(UNDECIDED, needed, interval)


def _order_index(n: int, tail: float) -> int:
    """The largest k ≥ 1 with ``P(Bin(n, ½) ≤ k - 1) ≤ tail`` (k ≤ n/2), or 0 when even k = 1 fails."""
    k, cumulative = 0, 0.0
    while k < n // 2:
        cumulative += math.comb(n, k) / 2.0**n
        if cumulative > tail:
            break
        k += 1
    return k
