"""Profile diff: two profile documents in, per-region changes with confidence intervals out (no torch).

Regions line up by *path*, the region id without its kind prefix, so ``untuned_module:unet`` before
and ``aot_module:unet`` after are one row, and a region that moved into a nested tree still meets
its old self. A document may name the object its paths start from (``target.root``: entry mode's
``pipe``); that root is stripped from the paths of a side that names none, so an entry capture's
``unet`` meets a script capture's ``pipe.unet`` (and an AITune profile's ``unet``). An entry
method's region that only one side has (``vae.decode``) lines up with its module (``vae``) when
only the other side has that: the wrapper ``aot_module:vae`` that tuning put in its place; or,
when the method bypasses its module's forward (diffusers' ``vae.decode``), with the tuned child
under its module that only the other side has (``aot_module:vae.decoder``): one pairing rule,
`lined_up`, that the viewer reads too. The headline looks through a region on one side only where
the other side can look through it as well (`kept_whole`), so ``bert`` whole after tuning meets
``bert`` whole before it.

Every ratio is after ÷ before of the median over the measured runs. Its confidence interval is a
percentile bootstrap of the ratio of medians: each side's per-run samples are resampled with
replacement `BOOTSTRAP_RESAMPLES` times from a fixed seed, so the same two files always give the
same numbers. A side with fewer than two runs has no interval.

The resample indices depend only on the two sides' run counts, so they are drawn once and reused
for the run time, the residual and every region; the medians are then taken with numpy, one array
operation per side instead of thousands of Python calls.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Collection, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from aitune.compare.change import Change, change
from aitune.compare.phases import PhaseChange, TokenChange, phase_changes, token_changes
from aitune.errors import ProfileError
from aitune.markers import parse_region_id
from aitune.report import ranks
from aitune.report.headline import looked_through
from aitune.report.key_averages import operator_views
from aitune.report.memo import computed_once
from aitune.report.memory import WHOLE_RUN, memory_note, memory_rows
from aitune.report.model import UNSET, DocumentWarning, Profile, ProfileLike, as_profile, given, json_form, time_in
from aitune.report.regions import RegionIndex
from aitune.report.samples import (
    DOMAINS,
    Samples,
    headline_samples,
    region_samples,
    relative_path,
    residual_samples,
    run_samples,
    select_scenario,
)

TOP_OPERATORS = 10


@dataclass(frozen=True)
class RegionChange:
    """One region path in either profile, with the ids it had on each side."""

    path: str
    before_id: str | None
    after_id: str | None
    change: Change

    @property
    def status(self) -> str:
        """``both``, ``added`` (after only) or ``removed`` (before only)."""
        if self.before_id is None:
            return "added"
        return "removed" if self.after_id is None else "both"

    @property
    def kind_changed(self) -> bool:
        """On both sides, under different kinds (``untuned_module:unet`` → ``aot_module:unet``)."""
        kinds = {parse_region_id(region)[0] for region in (self.before_id, self.after_id) if region is not None}
        return self.status == "both" and len(kinds) > 1


@dataclass(frozen=True)
class OperatorChange:
    """An operator's self time per run (µs) on each side; ``None`` where it is not among the saved top rows."""

    key: str
    device_type: str
    before_us: float | None
    after_us: float | None

    @property
    def delta_us(self) -> float | None:
        return None if self.before_us is None or self.after_us is None else self.after_us - self.before_us


@dataclass(frozen=True)
class MemoryChange:
    """One region path's (or the whole run's) memory on one device, before and after (`aitune.report.memory`
    rows: allocated a median per run, peak live the highest run); ``None`` on a side without it."""

    path: str  # the lined-up region path, or aitune.report.memory.WHOLE_RUN
    device: str
    before_peak_bytes: int | None
    after_peak_bytes: int | None
    before_allocated_bytes: float | None
    after_allocated_bytes: float | None

    @property
    def peak_delta_bytes(self) -> int | None:
        if self.before_peak_bytes is None or self.after_peak_bytes is None:
            return None
        return self.after_peak_bytes - self.before_peak_bytes


@dataclass(frozen=True)
class ProfileDiff:
    """Everything `compare_profiles` found; `to_dict` is its JSON form."""

    domain: str
    scenario: str | None
    runs: tuple[int, int]
    run_time: Change
    residual: Change  # the time outside every region
    regions: list[RegionChange]  # every region, nested ones included
    headline: list[RegionChange]  # the headline's rows (see aitune.report.headline) but the residual
    operators: list[OperatorChange]
    warnings_only_before: list[dict[str, Any]] = field(default_factory=list)
    warnings_only_after: list[dict[str, Any]] = field(default_factory=list)
    world_sizes: tuple[int | None, int | None] = (None, None)  # ranks each side merged; None: one process
    phases: list[PhaseChange] = field(default_factory=list)  # per phase, when both sides are generate-like (CPU)
    tokens: list[TokenChange] = field(default_factory=list)  # time to first token, per output token
    memory: list[MemoryChange] = field(default_factory=list)  # whole run first, then regions by highest peak
    memory_notes: tuple[str | None, str | None] = (None, None)  # per side, why it has no memory (memory_note)

    @property
    def added(self) -> list[str]:
        return [row.path for row in self.regions if row.status == "added"]

    @property
    def removed(self) -> list[str]:
        return [row.path for row in self.regions if row.status == "removed"]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, derived properties included."""
        return {
            **asdict(self),
            "runs": {"before": self.runs[0], "after": self.runs[1]},
            "run_time": _change_dict(self.run_time),
            "residual": _change_dict(self.residual),
            "regions": [_region_dict(row) for row in self.regions],
            "headline": [_region_dict(row) for row in self.headline],
            "operators": [{**asdict(row), "delta_us": row.delta_us} for row in self.operators],
            "memory": [{**asdict(row), "peak_delta_bytes": row.peak_delta_bytes} for row in self.memory],
            "added": self.added,
            "removed": self.removed,
        }


def _change_dict(change: Change) -> dict[str, Any]:
    return {**asdict(change), "beyond_noise": change.beyond_noise}


def _region_dict(row: RegionChange) -> dict[str, Any]:
    return {**asdict(row), "change": _change_dict(row.change), "status": row.status}


@computed_once()  # each side is converted to the typed record once, and its headline rows found once
def compare_profiles(
    before: ProfileLike,
    after: ProfileLike,
    *,
    domain: str = "cpu",
    scenario: str | None = None,
) -> ProfileDiff:
    """Diff two valid profile documents in one time domain (``cpu`` or ``device``).

    ``scenario`` picks one scenario of documents that hold several (see `select_scenario`).
    """
    if domain not in DOMAINS:
        raise ProfileError(f"unknown time domain {domain!r}; choose one of {', '.join(DOMAINS)}.")
    old, new = select_scenario(before, scenario), select_scenario(after, scenario)
    old_record, new_record = _checked_side(old, domain, "before"), _checked_side(new, domain, "after")
    known: dict[tuple[str, tuple[float, ...], tuple[float, ...]], Change] = {}  # the headline repeats most regions
    warnings_before, warnings_after = _one_sided_warnings(old_record.warnings, new_record.warnings)
    return ProfileDiff(
        domain=domain,
        scenario=scenario,
        runs=(len(old_record.runs), len(new_record.runs)),
        run_time=change(run_samples(old, domain), run_samples(new, domain)),
        residual=change(residual_samples(old, domain), residual_samples(new, domain)),
        regions=_region_changes(*lined_up(old, new, region_samples, domain), known),
        headline=_region_changes(*lined_up(old, new, headline_samples, domain), known),
        operators=operator_changes(old, new, domain),
        warnings_only_before=warnings_before,
        warnings_only_after=warnings_after,
        world_sizes=(ranks.world_size(old_record), ranks.world_size(new_record)),
        phases=phase_changes(old, new) if domain == "cpu" else [],
        tokens=token_changes(old, new) if domain == "cpu" else [],
        memory=memory_changes(old, new),
        memory_notes=(memory_note(old), memory_note(new)),
    )


def memory_changes(before: ProfileLike, after: ProfileLike) -> list[MemoryChange]:
    """Each region path's memory per device on either side (paths relative to the aligning roots, as the
    time rows are), the whole run first, then by the higher peak of the two sides; [] when neither side has any."""
    roots = aligning_roots(before, after)
    sides = [
        {
            (row.label if row.role == "run" else relative_path(row.label, root), row.device): row
            for row in memory_rows(doc)
        }
        for doc, root in zip((before, after), roots, strict=True)
    ]
    rows = []
    for key in sides[0].keys() | sides[1].keys():
        old, new = sides[0].get(key), sides[1].get(key)
        rows.append(
            MemoryChange(
                key[0],
                key[1],
                old.peak_live_bytes if old else None,
                new.peak_live_bytes if new else None,
                old.allocated_bytes if old else None,
                new.allocated_bytes if new else None,
            )
        )
    rows.sort(
        key=lambda row: (
            row.path != WHOLE_RUN,
            -max(row.before_peak_bytes or 0, row.after_peak_bytes or 0),
            row.path,
            row.device,
        )
    )
    return rows


def regressed(diff: ProfileDiff, pct: float) -> bool:
    """The gate: the after run time is slower by more than ``pct`` percent *and* beyond noise.

    Without a confidence interval (a side with a single run) the ratio alone decides.
    """
    run = diff.run_time
    if run.ratio is None or run.ratio <= 1 + pct / 100:
        return False
    return run.ci_low is None or run.ci_low > 1


def aligning_roots(before: ProfileLike, after: ProfileLike) -> tuple[str, str]:
    """The root to strip from each side's paths so that the two sides line up; ``""``: none.

    Entry mode names the object its paths start from (``target.root``, e.g. ``pipe``: paths such as
    ``unet``); script mode names none, its paths starting from the script's globals (``pipe.unet``).
    A side that names no root has the other side's stripped, so both read ``unet``.
    """
    roots = (given(as_profile(before).target.root, ""), given(as_profile(after).target.root, ""))
    return ("" if roots[0] else roots[1], "" if roots[1] else roots[0])


def kept_whole(before: ProfileLike, after: ProfileLike) -> tuple[set[str], set[str]]:
    """Per side, the paths its headline shows whole although it could look through them: those the other
    side has but does not look through (a tuned wrapper has no regions inside), so the two meet as one row."""
    return _kept_whole(before, after, aligning_roots(before, after))


def _kept_whole(before: ProfileLike, after: ProfileLike, roots: tuple[str, str]) -> tuple[set[str], set[str]]:
    looked = [
        {relative_path(path, root) for path in looked_through(doc)}
        for doc, root in zip((before, after), roots, strict=True)
    ]
    present = [set(region_samples(doc, DOMAINS[0], root)) for doc, root in zip((before, after), roots, strict=True)]
    return tuple(  # type: ignore[return-value]
        {_absolute(path, root) for path in looked[side] - looked[1 - side] if path in present[1 - side]}
        for side, root in enumerate(roots)
    )


def _absolute(path: str, root: str) -> str:
    return f"{root}.{path}" if root else path


def lined_up(
    before: ProfileLike,
    after: ProfileLike,
    samples: Callable[[ProfileLike, str, str, Collection[str]], Samples],
    domain: str,
) -> tuple[Samples, Samples]:
    """Both sides' ``samples`` (`region_samples` or `headline_samples`) keyed by the paths they line up under.

    Paths are relative to the aligning roots (`aligning_roots`). Then an entry method's region
    that one side alone has (``vae.decode``) moves to its module's path (``vae``) when the other
    side alone has that path: after tuning, the wrapper ``aot_module:vae`` replaced
    ``untuned_module:vae.decode``, and the two are one row. Failing that, it moves to the largest
    tuned (managed) path under its module that the other side alone has: a method that bypasses its
    module's forward is tuned through a child, ``aot_module:vae.decoder``. A root object's own entry
    method (``generate``, module path ``""``) has no module to meet and stays as it is.
    """
    old_root, new_root = roots = aligning_roots(before, after)
    old_keep, new_keep = _kept_whole(before, after, roots)
    old, new = samples(before, domain, old_root, old_keep), samples(after, domain, new_root, new_keep)
    return (
        _methods_moved(old, new, RegionIndex(before), old_root),
        _methods_moved(new, old, RegionIndex(after), new_root),
    )


def headline_paths(before: ProfileLike, after: ProfileLike) -> tuple[dict[str, str], dict[str, str]]:
    """Per side, the label of each headline row but the residual (`HeadlineRow.label`) → the path compare
    lines it up under (see `lined_up`): what a chart of the two headlines groups its bars by."""
    sides = lined_up(before, after, headline_samples, DOMAINS[0])
    return tuple({label: path for path, (label, _) in side.items()} for side in sides)  # type: ignore[return-value]


def _methods_moved(own: Samples, other: Samples, regions: RegionIndex, root: str) -> Samples:
    # Judged against the other side as it came, so that one side's move never triggers the other's.
    moved = dict(own)
    for path, (region, _) in own.items():
        module, method = regions.module_path(region)
        module = relative_path(module, root)
        if not (method and module) or path in other:
            continue
        if module in other and module not in moved:
            moved[module] = moved.pop(path)
        elif (child := _tuned_child(module, own, other)) is not None and child not in moved:
            moved[child] = moved.pop(path)
    return moved


def _tuned_child(module: str, own: Samples, other: Samples) -> str | None:
    """The managed path under ``module`` that only ``other`` has, the largest by median time; None when none."""
    children = [
        path
        for path, (region, _) in other.items()
        if path.startswith(module + ".") and path not in own and parse_region_id(region)[0].managed
    ]
    return max(children, key=lambda path: (statistics.median(other[path][1] or [0.0]), path), default=None)


def operator_changes(
    before: ProfileLike, after: ProfileLike, domain: str, limit: int = TOP_OPERATORS
) -> list[OperatorChange]:
    """Self time per run of the top operators of either side, largest first."""
    old, new = _operator_self_times(before, domain), _operator_self_times(after, domain)
    rows = [OperatorChange(key[0], key[1], old.get(key), new.get(key)) for key in old.keys() | new.keys()]
    rows.sort(key=lambda row: (-max(row.before_us or 0.0, row.after_us or 0.0), row.key, row.device_type))
    return rows[:limit]


def _operator_self_times(doc: ProfileLike, domain: str) -> dict[tuple[str, str], float]:
    runs = max(1, len(as_profile(doc).traced_runs()))  # the runs the table totals
    times: dict[tuple[str, str], float] = {}
    for row in (row for view in operator_views(doc).values() for row in view):
        value = row.self_device_time_total_us if domain == "device" else row.self_cpu_time_total_us
        if value is not UNSET:
            times[(row.key, given(row.device_type, ""))] = value / runs
    return times


def _region_changes(
    before: Mapping[str, tuple[str, list[float]]],
    after: Mapping[str, tuple[str, list[float]]],
    known: dict[tuple[str, tuple[float, ...], tuple[float, ...]], Change],
) -> list[RegionChange]:
    """One row per path of either side, largest first; ``known`` bootstraps a path with the same samples once."""
    rows = []
    for path in before.keys() | after.keys():
        old_id, old = before.get(path, (None, []))
        new_id, new = after.get(path, (None, []))
        key = (path, tuple(old), tuple(new))
        if key not in known:
            known[key] = change(old, new)
        rows.append(RegionChange(path, old_id, new_id, known[key]))
    rows.sort(key=lambda row: (-max(row.change.before_us or 0.0, row.change.after_us or 0.0), row.path))
    return rows


def _one_sided_warnings(
    before: list[DocumentWarning], after: list[DocumentWarning]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Warnings whose code appears on one side only (messages carry figures, so codes are compared), as the
    document's dicts."""
    old_codes, new_codes = {w.code for w in before}, {w.code for w in after}
    return [json_form(w) for w in before if w.code not in new_codes], [
        json_form(w) for w in after if w.code not in old_codes
    ]


def _checked_side(doc: ProfileLike, domain: str, side: str) -> Profile:
    """``doc`` as the typed record; `ProfileError` unless it has measured runs with time in ``domain``."""
    record = as_profile(doc)
    if not record.runs:
        raise ProfileError(f"the {side} profile has no measured runs; capture it again.")
    if any(time_in(run.timing, domain) is None for run in record.runs):  # type: ignore[arg-type]
        raise ProfileError(f"the {side} profile has no {domain} time data; compare with --domain cpu.")
    return record
