"""Two generate-like documents compared per phase: each phase's time, each region's time within it, and the
token figures (time to first token, per output token), each a `Change` with its interval (no torch).

Phases line up by name (encoder, prefill, decode) and a phase's regions by path, as the headline's do.
Only phases and figures both sides have are compared: a side that is not generate-like compares none.
"""

from __future__ import annotations

from dataclasses import dataclass

from aitune.compare.change import Change, change
from aitune.report.headline import phase_rows
from aitune.report.model import ProfileLike
from aitune.report.phases import phase_figures, token_figures


@dataclass(frozen=True)
class PhaseRegionChange:
    """One region's time within a phase, before and after (``None`` on a side where the phase lacks it)."""

    path: str
    change: Change


@dataclass(frozen=True)
class PhaseChange:
    """One phase both sides have: its time per run, and its regions' times (the residual last)."""

    name: str
    change: Change
    regions: list[PhaseRegionChange]


@dataclass(frozen=True)
class TokenChange:
    """One token figure both sides have: ``ttft_us`` or ``per_output_token_us`` (median per run)."""

    figure: str
    change: Change


def phase_changes(before: ProfileLike, after: ProfileLike) -> list[PhaseChange]:
    """Every phase both documents have, in order, with the `change` of its samples."""
    old = {figure.name: figure for figure in phase_figures(before)}
    found = []
    for figure in phase_figures(after):
        if figure.name not in old:
            continue
        rows_before = {row.path: row.times_us for row in phase_rows(before, figure.name)}
        rows_after = {row.path: row.times_us for row in phase_rows(after, figure.name)}
        regions = [
            PhaseRegionChange(path, change(rows_before.get(path, []), rows_after.get(path, [])))
            for path in dict.fromkeys([*rows_before, *rows_after])
        ]
        found.append(PhaseChange(figure.name, change(old[figure.name].times_us, figure.times_us), regions))
    return found


def token_changes(before: ProfileLike, after: ProfileLike) -> list[TokenChange]:
    """Time to first token and per output token (each run's median), where both documents have them."""
    old, new = token_figures(before), token_figures(after)
    if old is None or new is None:
        return []
    pairs = [
        ("ttft_us", old.ttft_us, new.ttft_us),
        ("per_output_token_us", old.per_token_median_us, new.per_token_median_us),
    ]
    return [TokenChange(name, change(first, second)) for name, first, second in pairs if first and second]
