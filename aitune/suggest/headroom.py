"""A target's headroom: how far its counted work (matrix products, convolutions, attention) runs
below this machine's roofs (`aitune.report.efficiency`), and what that allows a backend to gain.

A backend cannot run counted work faster than the roof: the gain model's arithmetic speedup for
those kinds is capped at ``1 / fraction of the roof`` (`arithmetic_cap`). A region already near the
roof gains little from a compiler on them; one far below it keeps the calibrated speedup. Without
work or peaks in the profile, nothing is capped.
"""

from __future__ import annotations

from dataclasses import dataclass

from aitune.report.efficiency import RegionEfficiency

NEAR_ROOF = 0.7
"""Counted work at this fraction of its roof or above is near the peak: the reason says so."""
ROOFED_KINDS = frozenset({"matmul", "conv", "attention"})
"""The gain model's kinds whose work `aitune.analysis.work` counts."""


@dataclass(frozen=True)
class Headroom:
    """One region's counted work against the roofs: ``fraction_of_roof`` (roof time ÷ measured time)
    and the share of its operator time that is counted."""

    fraction_of_roof: float
    counted_share: float
    bound: str | None

    @property
    def arithmetic_cap(self) -> float:
        """The most a backend can speed up the counted kinds: ``1 / fraction_of_roof``, at least 1."""
        return max(1.0, 1.0 / self.fraction_of_roof) if self.fraction_of_roof > 0 else float("inf")

    @property
    def near_roof(self) -> bool:
        return self.fraction_of_roof >= NEAR_ROOF


def headroom_of(efficiency: RegionEfficiency | None) -> Headroom | None:
    """The `Headroom` of a region's efficiency; None without counted work or machine peaks."""
    if efficiency is None or efficiency.fraction_of_roof is None:
        return None
    return Headroom(efficiency.fraction_of_roof, 1.0 - efficiency.uncounted_fraction, efficiency.bound)


def capped_speedup(kind: str, speedup: float, headroom: Headroom | None) -> float:
    """``speedup`` of arithmetic ``kind``, capped by the headroom for the kinds the roofs bound."""
    if headroom is None or kind not in ROOFED_KINDS:
        return speedup
    return max(1.0, min(speedup, headroom.arithmetic_cap))
