"""One time budget for a whole tuning command: what is left, each region's share, and which backend to try next.

``TimeBudget(total_s)`` starts its clock when it is made (the command line makes it as the command
starts) and counts everything: captures, recording, builds, checks and timing. At the first trial it
keeps back ``reserve_factor`` × the time spent so far for what still has to run after tuning (the after
capture and the end-to-end verification cost about what the before capture did). Tuning gets the rest:

- each region, as it starts, gets a share of what is left in proportion to its expected value (the
  time suggest predicts tuning it saves), against the regions not started yet; what one region leaves
  unused flows to the next;
- within a region, backends go in the order of expected gain per second of trying, from a small table
  of priors (`EXPECTED_SPEEDUP`, `EXPECTED_TRY_S`) whose costs are replaced by what trying each backend
  took in this process;
- a backend whose expected cost does not fit what is left is not tried, and says so.

Pure bookkeeping over an injected clock: tests drive it with a fake one.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

Clock = Callable[[], float]
Named = TypeVar("Named")

EXPECTED_SPEEDUP: dict[str, float] = {
    "eager": 1.0,
    "autocast": 1.2,
    "onnxruntime": 1.3,
    "inductor": 1.4,
    "tensorrt": 2.0,
}
"""Rough priors of a backend's speedup on a region it wins: they order backends whose costs are alike."""

EXPECTED_TRY_S: dict[str, float] = {
    "eager": 0.0,
    "autocast": 1.0,
    "onnxruntime": 6.0,
    "inductor": 20.0,
    "tensorrt": 60.0,
}
"""Seconds to build, check and time a backend on a small region, before any was measured here (Inductor's
C++ build of a diffusers UNet block took 21 s on the 2-core machine; ONNX export and session a few)."""

UNKNOWN_SPEEDUP, UNKNOWN_TRY_S = 1.1, 10.0


class TimeBudget:
    """Seconds for the whole command, split among regions and backends as tuning goes."""

    def __init__(self, total_s: float, clock: Clock = time.monotonic, reserve_factor: float = 0.0) -> None:
        self.total_s = total_s
        self.clock = clock
        self.started = clock()
        self.reserve_factor = reserve_factor
        self.reserved_s: float | None = None  # fixed at the first trial
        self._weights: dict[str, float] = {}
        self._tries: dict[str, list[float]] = {}
        self._regions: dict[str, tuple[float, float]] = {}  # region → (share s, clock at its start)

    def expect(self, values: Mapping[str, float]) -> None:
        """Each region's expected value (e.g. ``1 - 1 / predicted end-to-end speedup``); shares follow it."""
        self._weights.update({region: max(0.0, value) for region, value in values.items()})

    def elapsed(self) -> float:
        return self.clock() - self.started

    def verification_deadline(self) -> float | None:
        """The clock value by which end-to-end verification must stop: the end of the budget less the after
        capture's time (half of what was kept back, about one capture); None before the first trial."""
        if self.reserved_s is None:
            return None
        return self.started + self.total_s - self.reserved_s / 2

    def left(self) -> float:
        """Seconds tuning may still use: the total, less what has run and what is kept for after tuning."""
        if self.reserved_s is None:
            self.reserved_s = self.reserve_factor * self.elapsed()
        return self.total_s - self.elapsed() - self.reserved_s

    def region_left(self, region: str) -> float:
        """Seconds left of ``region``'s share (fixed when the region first asks), never more than `left`."""
        if region not in self._regions:
            self._regions[region] = (self._share(region), self.clock())
        share, since = self._regions[region]
        return min(share - (self.clock() - since), self.left())

    def expected_try_s(self, backend: str) -> float:
        """What trying ``backend`` took here on average, else the prior."""
        measured = self._tries.get(backend)
        return statistics.fmean(measured) if measured else EXPECTED_TRY_S.get(backend, UNKNOWN_TRY_S)

    def record(self, backend: str, seconds: float) -> None:
        """Trying ``backend`` took ``seconds`` (build, check and timing): later estimates use it."""
        self._tries.setdefault(backend, []).append(seconds)

    def gain_per_second(self, backend: str) -> float:
        """Expected share of a region's time saved by ``backend``, per second of trying it."""
        saved = 1.0 - 1.0 / EXPECTED_SPEEDUP.get(backend, UNKNOWN_SPEEDUP)
        return saved / max(self.expected_try_s(backend), 0.1)

    def order(self, backends: Sequence[Named], name: Callable[[Named], str]) -> list[Named]:
        """``backends`` by expected gain per second of trying, best first (ties keep the given order)."""
        return sorted(backends, key=lambda backend: -self.gain_per_second(name(backend)))

    def why_not(self, region: str, backend: str) -> str | None:
        """Why ``backend`` is not tried on ``region`` now (the budget is spent, or it would not fit), or None."""
        if self.left() <= 0:
            kept = f", {self.reserved_s:.1f} s kept for the after capture and verification" if self.reserved_s else ""
            return f"not tried: the time budget of {self.total_s:g} s is spent ({self.elapsed():.1f} s used{kept})"
        left, cost = self.region_left(region), self.expected_try_s(backend)
        if cost > left:
            return (
                f"not tried: {backend} is expected to take {cost:.1f} s, more than the {max(left, 0.0):.1f} s "
                f"left of this region's share of the {self.total_s:g} s time budget"
            )
        return None

    def describe(self) -> dict[str, Any]:
        """JSON-ready: the total, what was kept back, and the measured seconds per backend."""
        return {
            "time_budget_s": self.total_s,
            "reserved_s": _rounded(self.reserved_s),
            "region_shares_s": {region: _rounded(share) for region, (share, _) in self._regions.items()},
            "measured_try_s": {backend: [_rounded(s) for s in tries] for backend, tries in self._tries.items()},
        }

    def _share(self, region: str) -> float:
        waiting = [r for r in self._weights if r not in self._regions and r != region]
        weight = self._weight(region)
        total = weight + sum(self._weight(r) for r in waiting)
        return self.left() * (weight / total if total > 0 else 1.0)

    def _weight(self, region: str) -> float:
        if region in self._weights:
            return self._weights[region]
        known: Iterable[float] = self._weights.values()
        return statistics.fmean(known) if self._weights else 1.0


def _rounded(value: float | None) -> float | None:
    return round(value, 3) if value is not None else None
