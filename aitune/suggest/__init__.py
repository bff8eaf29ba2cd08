"""Tuning targets from one profile: which regions to tune, and the end-to-end gain each could bring (no torch).

Every region of the runs' region tree (the flat regions when a profile has none) becomes a
`Target` named by the dotted module path ``aitune.torch.wrap`` and ``register_for_jit_tuning``
take (`aitune.suggest.candidates`): an entry method's region (``vae.decode``) stands for its
module (``vae``), and the root object's entry methods (``generate``) for none — the modules under
them are the targets. For each target:

- ``share``: the median over runs of region time ÷ run time in the chosen domain, and its range;
- ``upper_bound_speedup``: end to end, if it took no time, ``1 / (1 - share)`` (80% bounds it at 5×);
- ``predicted_speedup``: end to end, ``1 / ((1 - share) + share / s)``, where ``s`` (the
  ``predicted_region_speedup``) comes from the gain model (`aitune.suggest.gain`): the host overhead
  a compiled backend removes and the arithmetic it speeds up, from its operator mix and the
  machine's calibration that the profile carries;
- ``reasons``: stable codes with a sentence each (`aitune.suggest.reasons`); it is recommended when
  none of them blocks it.

Only regions named by a module path are targets (`aitune.suggest.candidates.wrappable`): the
annotations of a plain torch.profiler trace get advice instead. Targets are ranked recommended
first, then by predicted speedup. `Suggestions.recommended` picks the best recommended ones that
are disjoint, by path and by nesting (``inside``: a target that ran within another is never
combined with it); `Suggestions.combined` predicts disjoint targets together, per run, so the
figure is at least 1 and finite. `Advice` covers what lies beyond modules.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from aitune.analysis.shares import fraction, median_share
from aitune.errors import ProfileError
from aitune.report.efficiency import efficiency_by_region
from aitune.report.memo import computed_once
from aitune.report.model import Profile, ProfileLike, as_profile
from aitune.report.samples import DOMAINS, has_device_time, run_samples, select_scenario
from aitune.suggest.advice import Advice, advice
from aitune.suggest.candidates import Candidate, Found, gather
from aitune.suggest.forecast import Forecast
from aitune.suggest.gain import FALLBACK, UPPER_BOUND_CAP, Calibration, calibration_of, end_to_end, predict, upper_bound
from aitune.suggest.headroom import Headroom, headroom_of
from aitune.suggest.precision import ARITHMETIC_FACTORS, PrecisionOutlook, outlook
from aitune.suggest.reasons import Reason, headroom_reasons, reasons
from aitune.suggest.report_model import KIND, SCHEMA_VERSION

__all__ = [
    "FALLBACK",
    "UPPER_BOUND_CAP",
    "Advice",
    "Calibration",
    "Forecast",
    "Reason",
    "Suggestions",
    "Target",
    "suggest",
]

RANK_DIGITS = 3
"""Predicted speedups equal to this many decimals rank by share: a parent that adds nothing the
benchmarks speed up to its child's gain then comes first, and tuning it covers the child too."""


@dataclass(frozen=True)
class Target:
    path: str  # dotted module path from the discovery root, as aitune.torch.wrap(obj, [path]) takes it
    region_id: str
    module_type: str | None
    share: float  # median over runs of region time ÷ run time in the chosen domain
    share_low: float  # its min and max over the runs
    share_high: float
    time_per_run_us: float  # median
    calls_per_run: float  # median
    time_per_call_us: float
    upper_bound_speedup: float  # end to end, if the region took no time (capped: JSON has no infinity)
    predicted_region_speedup: float
    predicted_speedup: float  # end to end
    recommended: bool
    reasons: tuple[Reason, ...]
    inside: tuple[str, ...] = ()  # the target paths it ran within (its ancestors in the region tree), sorted
    times_us: tuple[float, ...] = field(default=(), repr=False, compare=False)  # per run, chosen domain
    fraction_of_roof: float | None = None  # its counted work's roof time ÷ measured time (`aitune.suggest.headroom`)
    outside_root: bool = False  # ran outside the root module's forward (a generate's encoder): the whole root leaves it
    inductor_region_speedup: float | None = None  # the region's own, priced as Inductor runs it (None: as predicted)

    @property
    def forecast(self) -> Forecast:
        """What compare sets beside the measured gain once the target is tuned."""
        return Forecast(self.path, self.region_id, self.predicted_speedup, self.predicted_region_speedup)


@dataclass(frozen=True)
class LedgerCorrection:
    """The bias applied (geometric mean of predicted ÷ verified end-to-end speedup) and the tunings behind it."""

    bias: float
    count: int

    def line(self) -> str:
        return (
            f"predictions divided by {self.bias:.2f}: this machine's ledger of {self.count} verified tuning(s) "
            "found the gain model's forecasts that far off (`aitune-profile history ledger`)"
        )


@dataclass(frozen=True)
class Suggestions:
    domain: str  # "device" where the profile has device time, else "cpu" (unless asked)
    run_time_us: float  # median run time in that domain
    targets: tuple[Target, ...]  # every candidate region, ranked: recommended first, by predicted_speedup
    advice: tuple[Advice, ...]
    top: int | None = None  # how many targets `recommended()` gives by default (None: all)
    scenario: str | None = None
    calibration: Calibration = FALLBACK  # the gain model's figures (the profile's, else the fallback table)
    run_times: tuple[float, ...] = ()  # each measured run's time in the domain (µs)
    precision: tuple[PrecisionOutlook, ...] = ()  # per target, when asked for a reduced precision
    correction: LedgerCorrection | None = None  # this machine's ledger, when it corrected the predictions

    def recommended(self, top: int | None = None) -> list[Target]:
        """The recommended targets, best first, skipping any inside (or around) one already picked."""
        limit = self.top if top is None else top
        picked: list[Target] = []
        for target in self.targets:
            if limit is not None and len(picked) >= limit:
                break
            if target.recommended and not any(_overlap(target, other) for other in picked):
                picked.append(target)
        return picked

    def verdict(self, target: Target, picked: list[Target] | None = None) -> str:
        """``tune`` for a target among ``picked`` (default: `recommended`); for a recommended target not
        picked, the picked one it lies inside or around; else its first blocking reason's code."""
        picked = self.recommended() if picked is None else picked
        if target in picked:
            return "tune"
        if not target.recommended:
            return next((reason.code for reason in target.reasons if reason.blocking), "-")
        for other in picked:
            if _within(target, other):
                return f"inside {other.path}"
            if _within(other, target):
                return f"around {other.path}"
        return "beyond --top"

    def combined(self, targets: Iterable[Target] | None = None) -> tuple[float, float]:
        """(predicted, upper bound) end-to-end speedup of tuning ``targets`` (default: `recommended`) together.

        Nested targets never combine: a target inside (or around) one taken before it is skipped. Each
        run's saving is the sum of its targets' (capped at the run), and the medians over the runs are
        returned: the prediction is at least 1 and finite; the bound reaches `UPPER_BOUND_CAP` only when
        the targets fill every run.
        """
        chosen: list[Target] = []
        for target in self.recommended() if targets is None else targets:
            if not any(_overlap(target, other) for other in chosen):
                chosen.append(target)
        runs = [(index, run) for index, run in enumerate(self.run_times) if run > 0]
        if not chosen or not runs:
            return 1.0, 1.0
        predicted, bound = [], []
        for index, run in runs:
            covered = min(run, sum(_time(target, index) for target in chosen))
            saved = min(covered, sum(_time(target, index) * (1 - 1 / _speedup(target)) for target in chosen))
            predicted.append(run / (run - saved) if run > saved else UPPER_BOUND_CAP)
            bound.append(upper_bound(fraction(covered, run)))
        return min(UPPER_BOUND_CAP, max(1.0, statistics.median(predicted))), statistics.median(bound)

    def priced_for_inductor(self, paths: Collection[str] | None = None) -> Suggestions:
        """These suggestions with the targets at ``paths`` (None: every one) priced as Inductor runs them
        (`Target.inductor_region_speedup`): once tuned, a region Inductor won is forecast for Inductor."""
        targets = tuple(
            _for_inductor(target) if paths is None or target.path in paths else target for target in self.targets
        )
        return replace(self, targets=targets)

    def forecasts(self) -> dict[str, Forecast]:
        """Each target's `Forecast`, by path."""
        return {target.path: target.forecast for target in self.targets}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with the paths `recommended` gives and their `combined` speedups."""
        predicted, bound = self.combined()
        return {
            "schema_version": SCHEMA_VERSION,
            "kind": KIND,
            "domain": self.domain,
            "scenario": self.scenario,
            "run_time_us": self.run_time_us,
            "targets": [{k: v for k, v in asdict(target).items() if k != "times_us"} for target in self.targets],
            "advice": [asdict(item) for item in self.advice],
            "recommended": [target.path for target in self.recommended()],
            "recommended_predicted_speedup": predicted,
            "recommended_upper_bound_speedup": bound,
            "gain_calibration": self.calibration.to_dict(),
            **({"precision": [asdict(item) for item in self.precision]} if self.precision else {}),
            **({"ledger_correction": asdict(self.correction)} if self.correction else {}),
        }


@computed_once()  # gather, advice, phase_advice and calibration_of read one typed record of the document
def suggest(
    profile: ProfileLike,
    *,
    top: int | None = None,
    domain: str | None = None,
    scenario: str | None = None,
    precision: str | None = None,
) -> Suggestions:
    """Rank the regions of a profile document (ours or AITune's) as tuning targets; see the module docstring.

    ``domain`` defaults to ``device`` when every run has device time, else ``cpu``; ``scenario``
    picks one scenario of a multi-scenario profile; ``top`` bounds `Suggestions.recommended`; ``precision``
    (bf16, int8) adds each target's outlook at that precision on this machine (`aitune.suggest.precision`).
    `ProfileError` for an unknown domain or scenario, or a profile without runs.
    """
    if top is not None and top < 1:
        raise ProfileError(f"top must be at least 1 (got {top}); pass --top 1 or more.")
    record = as_profile(select_scenario(profile, scenario))
    if not record.runs:
        raise ProfileError("the profile has no measured runs to suggest from; capture it again.")
    domain = _domain(record, domain)
    run_times = run_samples(record, domain)
    found = gather(record, domain)
    calibration = calibration_of(record, on_device=has_device_time(record))
    efficiency = efficiency_by_region(record)
    targets = sorted(
        (
            _target(candidate, found, run_times, domain, calibration, headroom_of(efficiency.get(candidate.region_id)))
            for candidate in found.candidates.values()
        ),
        key=lambda t: (not t.recommended, -round(t.predicted_speedup, RANK_DIGITS), -t.share, t.path),
    )
    outlooks: tuple[PrecisionOutlook, ...] = ()
    if precision is not None and precision != "fp32":
        if precision not in ARITHMETIC_FACTORS:
            raise ProfileError(
                f"unknown precision {precision[:40]!r}; choose one of fp32, {', '.join(ARITHMETIC_FACTORS)}."
            )
        by_path = {candidate.path: candidate for candidate in found.candidates.values()}
        outlooks = tuple(_outlook(by_path[t.path], domain, calibration, precision) for t in targets)
    return Suggestions(
        precision=outlooks,
        domain=domain,
        run_time_us=statistics.median(run_times),
        targets=tuple(targets),
        advice=tuple(advice(record, found, run_times, domain)),
        top=top,
        scenario=scenario,
        calibration=calibration,
        run_times=tuple(run_times),
    )


def _outlook(candidate: Candidate, domain: str, calibration: Calibration, precision: str) -> PrecisionOutlook:
    prediction = predict(candidate, domain, calibration)
    return outlook(candidate.path, precision, prediction.time_us, prediction.arithmetic_us, candidate.mix)


def _domain(doc: Profile, asked: str | None) -> str:
    has_device = has_device_time(doc)
    if asked is None:
        return "device" if has_device else "cpu"
    if asked not in DOMAINS:
        raise ProfileError(f"unknown time domain {asked!r}; choose one of {', '.join(DOMAINS)}.")
    if asked == "device" and not has_device:
        raise ProfileError("the profile has no device time data; suggest with --domain cpu.")
    return asked


def _for_inductor(target: Target) -> Target:
    if target.inductor_region_speedup is None:
        return target
    speedup = target.inductor_region_speedup
    return replace(target, predicted_region_speedup=speedup, predicted_speedup=end_to_end(target.share, speedup))


def _within(target: Target, other: Target) -> bool:
    """``target`` lies inside ``other``: under its path (``unet.blocks.0`` under ``unet``) or ran within it."""
    return target.path.startswith(other.path + ".") or other.path in target.inside


def _overlap(target: Target, other: Target) -> bool:
    """One target is the other or lies inside it."""
    return target.path == other.path or _within(target, other) or _within(other, target)


def _time(target: Target, index: int) -> float:
    """The target's time in run ``index`` (its median where the per-run times are unknown)."""
    return target.times_us[index] if index < len(target.times_us) else target.time_per_run_us


def _speedup(target: Target) -> float:
    """Its own predicted speedup, never below 1 (a target is never predicted to slow its region)."""
    return max(1.0, target.predicted_region_speedup)


def _target(
    candidate: Candidate,
    found: Found,
    run_times: list[float],
    domain: str,
    calibration: Calibration,
    headroom: Headroom | None = None,
) -> Target:
    shares = [fraction(time, run) for time, run in zip(candidate.times, run_times, strict=True)]
    share, time, calls = median_share(shares), candidate.median_us, statistics.median(candidate.calls)
    prediction = predict(candidate, domain, calibration, headroom)
    region_speedup = prediction.speedup
    inductor = predict(candidate, domain, calibration, headroom, inductor=True).speedup
    why = reasons(candidate, found, shares, prediction, domain) + headroom_reasons(headroom)
    return Target(
        path=candidate.path,
        region_id=candidate.region_id,
        module_type=candidate.module_type,
        share=share,
        share_low=min(shares),
        share_high=max(shares),
        time_per_run_us=time,
        calls_per_run=calls,
        time_per_call_us=time / calls if calls else 0.0,
        upper_bound_speedup=upper_bound(share),
        predicted_region_speedup=region_speedup,
        predicted_speedup=end_to_end(share, region_speedup),
        recommended=not any(reason.blocking for reason in why),
        reasons=why,
        inside=tuple(sorted(candidate.above)),
        times_us=tuple(candidate.times),
        fraction_of_roof=headroom.fraction_of_roof if headroom is not None else None,
        outside_root=candidate.outside_root,
        inductor_region_speedup=inductor if inductor != region_speedup else None,
    )
