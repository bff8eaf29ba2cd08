"""What suggest forecast for one target, as compare sets it beside what was measured (no torch).

The record suggest hands the later stages: `aitune.suggest.Suggestions.forecasts` makes it from the
ranked targets, `read_forecasts` from a ``suggestions.json`` a tune folder holds (both speedups are
end to end and of the region alone, before ÷ after).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aitune.errors import ProfileError
from aitune.report.problems import shortened


@dataclass(frozen=True)
class Forecast:
    """One target's predicted gain: ``path`` as `aitune.torch.wrap` takes it, the ``region_id`` it was
    measured by before (a method region such as ``untuned_module:vae.decode`` for path ``vae``), or None."""

    path: str
    region_id: str | None
    predicted_speedup: float | None  # end to end
    predicted_region_speedup: float | None  # the region's own


def read_forecasts(raw: Any, name: str) -> dict[str, Forecast]:
    """The forecasts of a parsed ``suggestions.json`` (`Suggestions.to_dict`) by path; `ProfileError` naming
    ``name`` and the field when it is not one."""
    targets = raw.get("targets") if isinstance(raw, Mapping) else None
    if not isinstance(targets, list):
        raise _bad(name, "has no targets list, so it is not what `aitune-profile suggest --json` writes")
    forecasts = [_forecast(item, f"targets[{index}]", name) for index, item in enumerate(targets)]
    return {forecast.path: forecast for forecast in forecasts}


def _forecast(item: Any, where: str, name: str) -> Forecast:
    if not isinstance(item, Mapping):
        raise _bad(name, f"{where} is not an object")
    path, region = item.get("path"), item.get("region_id")
    if not isinstance(path, str):
        raise _bad(name, f"{where}.path {shortened(repr(path))} is not a string")
    if region is not None and not isinstance(region, str):
        raise _bad(name, f"{where}.region_id {shortened(repr(region))} is not a string")
    speedups = [
        _speedup(item.get(key), f"{where}.{key}", name) for key in ("predicted_speedup", "predicted_region_speedup")
    ]
    return Forecast(path, region, *speedups)


def _speedup(value: Any, where: str, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise _bad(name, f"{where} {shortened(repr(value))} is not a speedup (a number of at least 0, or null)")
    return float(value)


def _bad(name: str, problem: str) -> ProfileError:
    return ProfileError(f"{name}: {problem}; write it again with `aitune-profile suggest --json` or `tune`.")
