"""What suggest forecast for one target, as compare sets it beside what was measured (no torch).

The record suggest hands the later stages: `aitune.suggest.Suggestions.forecasts` makes it from the
ranked targets, `read_forecasts` from a ``suggestions.json`` a tune folder holds, converted into its typed
model (`aitune.suggest.report_model`; both speedups are end to end and of the region alone, before ÷ after).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from aitune.errors import ProfileError
from aitune.report.problems import first_problem
from aitune.suggest.report_model import SuggestionsReport


@dataclass(frozen=True)
class Forecast:
    """One target's predicted gain: ``path`` as `aitune.torch.wrap` takes it, the ``region_id`` it was
    measured by before (a method region such as ``untuned_module:vae.decode`` for path ``vae``), or None."""

    path: str
    region_id: str | None
    predicted_speedup: float | None  # end to end
    predicted_region_speedup: float | None  # the region's own


def read_forecasts(raw: Any, name: str) -> dict[str, Forecast]:
    """The forecasts of a parsed ``suggestions.json`` (`Suggestions.to_dict`) by path, converted into
    `SuggestionsReport`; `ProfileError` naming ``name`` and the JSON path of the first problem when it is not one."""
    if not _holds_targets(raw):
        raise _bad(name, "has no targets list, so it is not what `aitune-profile suggest --json` writes")
    try:
        report = msgspec.convert(raw, SuggestionsReport)
    except msgspec.ValidationError:
        raise _bad(name, first_problem(raw, SuggestionsReport)) from None
    return {
        target.path: Forecast(target.path, target.region_id, target.predicted_speedup, target.predicted_region_speedup)
        for target in report.targets
    }


def _holds_targets(raw: Any) -> bool:
    """Whether the parsed JSON ``raw`` is taken for a suggestions file at all, however wrong the rest: an object
    with a list of targets."""
    return isinstance(raw, Mapping) and isinstance(raw.get("targets"), list)


def _bad(name: str, problem: str) -> ProfileError:
    return ProfileError(f"{name}: {problem}; write it again with `aitune-profile suggest --json` or `tune`.")
