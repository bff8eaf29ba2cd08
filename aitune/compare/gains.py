"""Predicted against realised gain: what suggest forecast for each tuned region, and what was measured.

One speedup convention throughout: a speedup is before ÷ after (above 1: faster), the inverse of
compare's ratios (after ÷ before). A region's realised end-to-end gain is its end-to-end verification's
figure (alternating rounds in one process: its contribution, or the run against eager when it is the
only one kept). The captures give the rest: the run's speedup had only that region changed,
``run_before / (run_before - (region_before - region_after))`` from medians over the measured runs, and
the region's own speedup, so a reader sees where the time moved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from aitune.compare import Change, ProfileDiff
from aitune.compare.verification import RegionCheck
from aitune.markers import UNTUNED_REGION_KIND, parse_region_id
from aitune.report.formatting import factor
from aitune.report.samples import path_of

if TYPE_CHECKING:  # `compare` of two profiles prints speedups from here without loading suggest
    from aitune.suggest import Suggestions, Target
    from aitune.suggest.forecast import Forecast

MISSING = "-"


@dataclass(frozen=True)
class RegionGain:
    """One region the loop tried to tune: the backend that won (or ``eager``), why, and the two gains."""

    path: str
    winner: str
    reason: str | None
    predicted_speedup: float | None  # end to end, from suggest
    realised_speedup: float | None  # end to end: verified where it was, else the captures' figure below
    predicted_region_speedup: float | None
    realised_region_speedup: float | None  # the region's own time in the two captures
    check: RegionCheck | None = None  # the end-to-end verification's verdict; None when it was not verified
    captured_speedup: float | None = None  # the captures' run speedup had only this region changed

    @property
    def tuned(self) -> bool:
        """True when a backend won the trials and, if verified, the run was faster with it."""
        return self.winner != "eager" and (self.check is None or self.check.kept)

    @property
    def note(self) -> str:
        """Why it was kept as it was (the reason no backend won, or the verification that put it back);
        for a verified region, its figures; empty for a tuned, unverified one."""
        if self.check is not None and self.winner != "eager":
            return self.check.judged()
        return self.reason or ("" if self.tuned else "kept as it was")

    @property
    def realised_shown(self) -> tuple[float | None, float | None]:
        """The realised speedups (end to end, for the region) a view shows: none for a region kept as it
        was, whose measured change is noise."""
        return (self.realised_speedup, self.realised_region_speedup) if self.tuned else (None, None)

    @property
    def prediction_error(self) -> float | None:
        """Predicted ÷ realised end-to-end speedup (1: exact; above 1: the forecast was optimistic)."""
        if self.predicted_speedup is None or not self.realised_speedup:
            return None
        return self.predicted_speedup / self.realised_speedup

    def to_dict(self) -> dict[str, Any]:
        check = self.check.to_dict() if self.check is not None else None
        return {**asdict(self), "check": check, "tuned": self.tuned, "prediction_error": self.prediction_error}


def speedup(change: Change) -> tuple[float | None, float | None, float | None]:
    """``(speedup, low, high)``: compare's after ÷ before ratio and interval turned into before ÷ after.

    >>> speedup(Change(before_us=100.0, after_us=50.0, ratio=0.5, ci_low=0.4, ci_high=0.625))
    (2.0, 1.6, 2.5)
    """
    return _inverse(change.ratio), _inverse(change.ci_high), _inverse(change.ci_low)


def change_speedup(change: Change) -> str:
    """``1.29× [1.20, 1.38]``: a change as a speedup (before ÷ after) with its interval, as far as they exist."""
    return factor(*speedup(change))


def speedup_line(change: Change) -> str:
    """``speedup 1.29× [1.20, 1.38] (before ÷ after run time)``: the run's speedup, as every reader words it."""
    return f"speedup {change_speedup(change)} (before ÷ after run time)"


def region_gains(
    forecasts: Mapping[str, Forecast],
    diff: ProfileDiff,
    outcomes: Mapping[str, tuple[str, str | None]],
    whole_model_predicted: float | None = None,
    checks: Mapping[str, RegionCheck] | None = None,
) -> list[RegionGain]:
    """One `RegionGain` per tuned path in ``outcomes`` (path → (winner, reason)), in that order, with its
    end-to-end verification from ``checks`` (by path) where there is one.

    ``forecasts`` (by path) are suggest's for the before profile (`aitune.suggest.Suggestions.forecasts`). A
    target that suggest reached through a method region (``vae.decode`` → ``vae``) is measured by that
    region before and by whichever of the two paths exists after. The whole model (path ``""``) is
    measured by the run itself, against ``whole_model_predicted``.
    """
    from aitune.suggest.forecast import Forecast

    whole = Forecast("", None, whole_model_predicted, whole_model_predicted)
    rows = {row.path: row.change for row in diff.regions}
    # compare may line a method region up under its module's path (``vae.decode`` with ``aot_module:vae``).
    by_before_id = {row.before_id: row.change for row in diff.regions if row.before_id is not None}
    run_before = diff.run_time.before_us
    gains = []
    for path, (winner, reason) in outcomes.items():
        forecast = whole if path == "" else forecasts.get(path, Forecast(path, None, None, None))
        measured_path = path_of(forecast.region_id) if forecast.region_id is not None else path
        before = by_before_id.get(forecast.region_id, rows.get(measured_path, Change(None, None))).before_us
        after = _after_time(rows, (path, measured_path))
        if path == "":
            before, after = run_before, diff.run_time.after_us
        check, captured = (checks or {}).get(path), _end_to_end(run_before, before, after)
        gains.append(
            RegionGain(
                path=path,
                winner=winner,
                reason=reason,
                predicted_speedup=forecast.predicted_speedup,
                realised_speedup=check.speedup.median if check is not None else captured,
                predicted_region_speedup=forecast.predicted_region_speedup,
                realised_region_speedup=before / after if before and after else None,
                check=check,
                captured_speedup=captured,
            )
        )
    return gains


def _inverse(value: float | None) -> float | None:
    return 1.0 / value if value else None


def _after_time(rows: Mapping[str, Change], paths: Sequence[str]) -> float | None:
    for path in paths:
        after = rows.get(path, Change(None, None)).after_us
        if after is not None:
            return after
    return None


def _end_to_end(run_before: float | None, before: float | None, after: float | None) -> float | None:
    if not run_before or before is None or after is None:
        return None
    remaining = run_before - (before - after)
    return run_before / remaining if remaining > 0 else None


def outermost(targets: Sequence[Target]) -> list[Target]:
    """The targets no other target contains (``blocks.0`` is inside ``blocks``), in their order."""
    paths = {target.path for target in targets}
    return [
        target
        for target in targets
        if target.path and not any(target.path.startswith(f"{other}.") for other in paths if other)
    ]


@dataclass(frozen=True)
class WholeModel:
    """The whole model (one build of ``obj`` itself) weighed against the separate regions suggest chose.

    Both predictions combine suggest's per-region forecasts as suggest does (`Suggestions.combined`): the
    whole model covers every module under the root that runs inside the root's forward (not a generate's
    encoder, which the entry method calls beside it), the separate regions only the chosen ones. It is
    chosen when it is predicted at least as fast, for one build instead of several; if it then fails
    or loses, the separate regions are tuned instead.
    """

    predicted_speedup: float | None
    separate_predicted_speedup: float | None
    separate_paths: tuple[str, ...]
    chosen: bool
    reason: str


def whole_model_forecast(found: Suggestions) -> float | None:
    """Suggest's end-to-end forecast for one build of the root module: its outermost targets combined, less those
    the entry method runs beside the root's forward; None when it has none."""
    top = outermost([target for target in found.targets if target.predicted_region_speedup])
    covered = [target for target in top if not target.outside_root]
    return found.combined(covered)[0] if covered else None


def with_settings_cost(forecast: float, cost: float) -> float:
    """The whole model's forecast once new ``generate`` settings make the eager run ``cost`` times as long (the
    decoder recipe's static cache, measured eager with ÷ eager without): the time the forecast saves is saved
    all the same and the settings' own time is added, ``1 / (1 / forecast + cost - 1)``.

    >>> round(with_settings_cost(1.45, 1.11), 2)
    1.25
    """
    return 1 / max(1 / forecast + cost - 1, 1e-6)  # a million at most, as suggest caps: JSON has no infinity


def weigh_whole_model(found: Suggestions, paths: Sequence[str]) -> WholeModel | None:
    """How tuning the root module whole compares with tuning ``paths`` (suggest's choice among ``found``);
    None when one path was chosen. The caller knows whether the root is a module."""
    if len(paths) < 2:
        return None
    targets = [target for target in found.targets if target.predicted_region_speedup]
    top, chosen_targets = outermost(targets), [target for target in targets if target.path in paths]
    whole = whole_model_forecast(found)
    separate = found.combined(chosen_targets)[0] if chosen_targets else None
    chosen = whole is not None and (separate is None or whole >= separate)
    figures = f"{factor(whole or 0)} predicted whole, {factor(separate or 0)} for {', '.join(paths)}"
    left = [target.path for target in top if target.outside_root]
    if left:  # run by the entry method beside the root's forward, so the whole root's build never runs them
        figures += f"; the whole leaves {', '.join(left)} eager: it runs outside the root's forward"
    reason = f"one build instead of {len(paths)} ({figures})" if chosen else f"separate regions win ({figures})"
    return WholeModel(whole, separate, tuple(paths), chosen, reason)


SLOWDOWN_MARGIN = 0.10
"""An untuned region is reported slower after tuning when its interval's low end is above 1 + this."""


@dataclass(frozen=True)
class Slowdown:
    """An untuned region that ran slower after tuning, beyond noise: after ÷ before and its interval."""

    path: str
    factor: float
    ci_low: float
    ci_high: float


def untuned_slowdowns(diff: ProfileDiff, tuned_paths: Sequence[str], margin: float = SLOWDOWN_MARGIN) -> list[Slowdown]:
    """The regions that ran their own code on both sides and got slower beyond noise, slowest first.

    A region that holds a tuned path, or sits inside one, is left out (its time changed with the
    tuned one). A backend that takes the threads the eager code needs (oversubscription) shows here;
    so does a machine that got busier between the two captures, which the warning says.
    """
    slowed = []
    for row in diff.regions:
        change = row.change
        if row.status != "both" or change.ratio is None or change.ci_low is None or change.ci_high is None:
            continue
        kinds = {parse_region_id(region)[0].id_prefix for region in (row.before_id, row.after_id) if region is not None}
        if kinds != {UNTUNED_REGION_KIND} or any(_related(row.path, path) for path in tuned_paths):
            continue
        if change.ci_low > 1 + margin:
            slowed.append(Slowdown(row.path, change.ratio, change.ci_low, change.ci_high))
    return sorted(slowed, key=lambda slowdown: -slowdown.factor)


def slowdown_line(slowdowns: Sequence[Slowdown], limit: int = 5) -> str | None:
    """``untuned regions ran slower after tuning: decoder 1.31× [1.20, 1.45]; …``, or None for none."""
    if not slowdowns:
        return None
    shown = "; ".join(f"{s.path} {factor(s.factor, s.ci_low, s.ci_high)}" for s in slowdowns[:limit])
    more = f" and {len(slowdowns) - limit} more" if len(slowdowns) > limit else ""
    return (
        f"warning: untuned regions ran slower after tuning: {shown}{more} (after ÷ before); a tuned backend may be "
        "taking the threads they need, or the machine got busier between the captures"
    )


def _related(path: str, tuned: str) -> bool:
    """True when one path holds the other (the whole model, path "", holds every path)."""
    return not tuned or not path or path == tuned or path.startswith(f"{tuned}.") or tuned.startswith(f"{path}.")
