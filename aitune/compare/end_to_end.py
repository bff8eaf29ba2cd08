"""The one end-to-end figure a user reads after tuning, and where it came from (no torch).

Two captures a minute apart differ by drift and by the profiler's cost (the profiler slows many small
eager operators more than one compiled graph), so the figure every reader shows as "end to end" is the
end-to-end verification's: eager and tuned runs alternating in one process, its median ratio and
interval (`aitune.compare.verification`). The captures stay, for where the time moved, and are labelled
as the captures; when their ratio falls outside the verified interval the readers say so in one line.
Where nothing stayed tuned, nothing claims a speedup.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aitune.compare.diff import ProfileDiff
from aitune.compare.gains import RegionGain, speedup
from aitune.compare.verification import Verification
from aitune.report.formatting import factor

Figure = tuple[float | None, float | None, float | None]  # a speedup, its interval's low and high ends

VERIFIED = "verified"  # alternating eager and tuned rounds in one process
CAPTURES = "captures"  # the two captures, because the loop was told not to verify
NOTHING_TUNED = "nothing tuned"  # no figure: the model runs as it did
SOURCES = (VERIFIED, CAPTURES, NOTHING_TUNED)


@dataclass(frozen=True)
class EndToEnd:
    """The run's speedup (before ÷ after) a user reads, its interval, and its `SOURCES` entry; ``rounds`` counts
    the alternating rounds of a verified figure. No value where nothing stayed tuned."""

    source: str
    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    rounds: int | None = None

    def shown(self) -> str:
        """``1.60× [1.55, 1.69] faster, verified over 12 alternating eager/tuned rounds in one process``."""
        if self.source == NOTHING_TUNED or self.value is None:
            return "nothing stayed tuned, so the model runs as before (no speedup is claimed)"
        verdict = "faster" if self.value >= 1 else "slower"
        figure = f"{factor(self.value, self.ci_low, self.ci_high)} {verdict}"
        if self.source == VERIFIED:
            return f"{figure}, verified over {self.rounds} alternating eager/tuned rounds in one process"
        return f"{figure}, from the two captures (not verified in alternating rounds)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "source": self.source,
            "rounds": self.rounds,
        }


def end_to_end(diff: ProfileDiff, gains: Sequence[RegionGain], verification: Verification | None) -> EndToEnd:
    """The figure to show: the verification's kept set against eager where the loop verified what stayed tuned,
    the two captures' run-time speedup where it was told not to verify, none where nothing stayed tuned."""
    if not any(gain.tuned for gain in gains):
        return EndToEnd(NOTHING_TUNED)
    verified = verification.end_to_end if verification is not None and verification.kept else None
    if verified is not None:
        return EndToEnd(VERIFIED, verified.median, verified.ci_low, verified.ci_high, verified.rounds)
    return EndToEnd(CAPTURES, *speedup(diff.run_time))


def captures_line(figure: EndToEnd, captured: Figure) -> str | None:
    """``the captures differ from the verified figure (2.82× [2.13, 2.86] against 1.60× [1.55, 1.69]): drift or
    profiler cost`` when the captures' ratio lies outside the verified interval; None otherwise.

    >>> captures_line(EndToEnd(VERIFIED, 1.6, 1.55, 1.69, 12), (1.62, 1.4, 1.8)) is None
    True
    """
    value = captured[0]
    if figure.source != VERIFIED or value is None or figure.ci_low is None or figure.ci_high is None:
        return None
    if figure.ci_low <= value <= figure.ci_high or not math.isfinite(value):
        return None
    return (
        f"the captures differ from the verified figure ({factor(*captured)} against "
        f"{factor(figure.value, figure.ci_low, figure.ci_high)}): drift or profiler cost; "
        "read the captures for where the time moved, the verified figure for how much"
    )
