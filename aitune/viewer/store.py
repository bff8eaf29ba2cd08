"""The viewer's data: the loaded profile(s) and every table derived from them, cached per pair.

Derivations call `aitune.viewer.tables` (one profile) and `aitune.compare` (two profiles); this
class only loads, caches and turns loading failures into one sentence in ``problem``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from pathlib import Path
from typing import Any

import msgspec
import pandas as pd
import param

from aitune import compare
from aitune.analysis import TraceEvents
from aitune.compare.loop_report import LoopReport
from aitune.errors import ProfileError
from aitune.report import scenario_names
from aitune.report.efficiency import roofs
from aitune.report.memory import memory_note, memory_source
from aitune.report.model import DocumentWarning, MachinePeak, as_profile
from aitune.report.phases import split_line, tokens_line
from aitune.report.safe_text import shown_name
from aitune.report.samples import has_device_time
from aitune.suggest import Suggestions, suggest
from aitune.viewer import sources, tables, tree
from aitune.viewer.sources import Loaded
from aitune.viewer.tables import Column

SIDES = ("before", "after")
OPERATOR_ROWS = 200
"""Operators listed in the merged before/after table (each side saves its top rows only)."""


class ProfileStore(param.Parameterized):
    """One or two loaded profiles (``before`` alone for a single profile) and their derived tables."""

    runs_dir = param.ClassSelector(class_=Path, default=Path("sample_traces"), doc="folder the page lists")
    before = param.ClassSelector(class_=Loaded, default=None, allow_None=True)
    after = param.ClassSelector(class_=Loaded, default=None, allow_None=True)
    problem = param.String(default="", doc="the last loading problem as one sentence; empty when none")
    scenario = param.String(default=None, allow_None=True, doc="scenario shown; None: each profile's first")
    compared = param.Integer(default=0, doc="bumped each time a diff of the pair becomes available")

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._cache: dict[Hashable, Any] = {}

    @param.depends("before", "after", "scenario", watch=True)
    def _forget(self) -> None:
        self._cache.clear()

    # Loading -------------------------------------------------------------------------------

    def available(self) -> list[str]:
        """Profile names in the runs folder, for the pickers."""
        return sources.list_profiles(self.runs_dir)

    def open_names(self, before: str | None, after: str | None = None) -> bool:
        """Load profiles by name from the runs folder; on failure keep what was shown and set ``problem``."""
        try:
            loaded = [sources.load_from_folder(self.runs_dir, name) if name else None for name in (before, after)]
        except ProfileError as error:
            self.problem = str(error)
            return False
        self._show(*loaded)
        return True

    def open_uploads(self, files: Mapping[str, bytes]) -> bool:
        """Load one or two uploaded files (in upload order: before, then after); ``problem`` on failure."""
        if not 1 <= len(files) <= 2:
            self.problem = f"{len(files)} files were uploaded; upload one profile, or two to compare them."
            return False
        try:
            loaded = [Loaded(name, sources.profile_from_bytes(data, name)) for name, data in files.items()]
        except ProfileError as error:
            self.problem = str(error)
            return False
        self._show(*loaded, None)
        return True

    def _show(self, before: Loaded | None, after: Loaded | None, *_: Any) -> None:
        if before is None:
            before, after = after, None
        self.param.update(before=before, after=after, problem="", scenario=None)

    # What is loaded ------------------------------------------------------------------------

    @property
    def is_pair(self) -> bool:
        return self.before is not None and self.after is not None

    def sides(self) -> dict[str, Loaded]:
        """The loaded profiles by side, ``before`` first, narrowed to the chosen scenario; empty when none."""
        return {side: loaded.scenario(self.scenario) for side in SIDES if (loaded := getattr(self, side)) is not None}

    def pair(self) -> tuple[Loaded, Loaded]:
        """Both sides narrowed to the chosen scenario, before first; only for a pair (`is_pair`)."""
        before, after = self.sides().values()
        return before, after

    def scenarios(self) -> list[str]:
        """The scenario names every loaded profile has (in the before profile's order); [] for single-input ones."""
        loaded = [item for item in (self.before, self.after) if item is not None]
        names = [scenario_names(item.doc) for item in loaded]
        return [name for name in names[0] if all(name in other for other in names)] if names else []

    def has_device_time(self) -> bool:
        """Whether every loaded profile has device time, so the device domain can be offered."""
        loaded = self.sides().values()
        return bool(loaded) and all(has_device_time(item.doc) for item in loaded)

    # Derived tables ------------------------------------------------------------------------

    def region_table(self, domain: str) -> pd.DataFrame:
        """Per headline row: median time and fraction per side in ``domain``; residual as its own row.

        A pair's rows are compare's: the same regions kept whole (`aitune.compare.kept_whole`), carrying the
        paths `aitune.compare` lines them up under (``vae.decode`` before and the wrapper ``aot_module:vae``
        or the tuned child ``aot_module:vae.decoder`` after are one path), so their bars stand together.
        """

        def lined_up() -> pd.DataFrame:
            if not self.is_pair:
                return self._stacked(lambda doc: tables.region_summary(doc, domain))
            before, after = self.pair()
            keep = compare.kept_whole(before.doc, after.doc)
            frames = [
                _on_side(tables.region_summary(loaded.doc, domain, kept), side)
                for side, loaded, kept in zip(SIDES, (before, after), keep, strict=True)
            ]
            regions = pd.concat(frames, ignore_index=True)
            paths = dict(zip(SIDES, compare.headline_paths(before.doc, after.doc), strict=True))
            rows = regions[[Column.SIDE, Column.REGION_ID, Column.PATH]].itertuples(index=False)
            return regions.assign(**{Column.PATH: [paths[side].get(label, path) for side, label, path in rows]})

        return self._cached(("regions", domain), lined_up)

    def run_table(self) -> pd.DataFrame:
        """Every measured run of every side, with a ``side`` column and outliers marked."""
        return self._cached("runs", lambda: self._stacked(tables.run_timing))

    def phase_table(self) -> pd.DataFrame:
        """The phases of every generate-like side (`tables.phase_table`), with a ``side`` column."""
        return self._cached("phases", lambda: self._stacked(tables.phase_table))

    def phase_lines(self) -> list[str]:
        """Per generate-like side: its token figures and how its runs were split (`aitune.report.phases`)."""
        lines = []
        for side, loaded in self.sides().items():
            lines += [f"{side}: {line}" for line in (tokens_line(loaded.doc), split_line(loaded.doc)) if line]
        return lines

    def has_ranks(self) -> bool:
        """Whether any loaded profile is a merged one (`aitune-profile merge`), so the Ranks tab has something."""
        return any(not tables.rank_table(loaded.doc).empty for loaded in self.sides().values())

    def rank_table(self) -> pd.DataFrame:
        """Every rank of every merged side, with a ``side`` column."""
        return self._cached("ranks", lambda: self._stacked(tables.rank_table))

    def rank_region_table(self) -> pd.DataFrame:
        """Per side, quantity (the run time, each region) and rank: the median (µs), slowest rank and imbalance."""
        return self._cached("rank regions", lambda: self._stacked(tables.rank_region_table))

    def operator_table(self, domain: str = "cpu") -> pd.DataFrame:
        """One profile: its key-averages rows. A pair: compare's per-run self time per side and the delta."""
        if not self.is_pair:
            return self._cached("operators", lambda: self._stacked(tables.operator_table))
        return self._cached(("operator changes", domain), lambda: self._operator_changes(self._domain(domain)))

    def efficiency_table(self) -> pd.DataFrame:
        """Every side's regions with work (`tables.efficiency_table`), with a ``side`` column."""
        return self._cached("efficiency", lambda: self._stacked(tables.efficiency_table))

    def machine_peaks(self) -> dict[str, dict[str, MachinePeak]]:
        """Each side's measured roofs by backend (`aitune.report.efficiency.roofs`); sides without left out."""
        return {side: peaks for side, loaded in self.sides().items() if (peaks := roofs(loaded.doc))}

    def has_tree(self) -> bool:
        """Whether any loaded profile holds nested regions, so the region tree has something to show."""
        return any(tree.has_tree(loaded.doc) for loaded in self.sides().values())

    def tree_runs(self, domain: str, run: int | None) -> dict[str, int]:
        """The run each side's tree is read from: ``run``, or that side's median run in ``domain`` when None."""
        return {
            side: tree.median_run(loaded.doc, domain) if run is None else run for side, loaded in self.sides().items()
        }

    def tree_table(self, domain: str, run: int | None) -> pd.DataFrame:
        """The region tree of one run per side (see `tree_runs`), aligned by path; calls, total and self µs."""

        def aligned() -> pd.DataFrame:
            runs = self.tree_runs(domain, run)
            docs = {side: loaded.doc for side, loaded in self.sides().items()}
            nodes = {side: tree.run_nodes(docs[side], runs[side], domain) for side in docs}
            if self.is_pair:
                nodes = tree.lined_up_nodes(*docs.values(), nodes)
            return tree.aligned_tree(nodes)

        return self._cached(("tree", domain, run), aligned)

    @property
    def suggested_side(self) -> str:
        """The side suggestions are read from: the only profile ("what to tune"), or a pair's after ("next")."""
        return "after" if self.is_pair else "before"

    def suggestions(self, domain: str) -> Suggestions | None:
        """`aitune.suggest` on `suggested_side` in ``domain`` (cpu without device time); None without a profile."""
        loaded = self.sides().get(self.suggested_side)
        if loaded is None:
            return None
        return self._cached(("suggestions", self._domain(domain)), lambda: self._suggest(loaded, self._domain(domain)))

    def _suggest(self, loaded: Loaded, domain: str) -> Suggestions | None:
        try:
            return suggest(loaded.doc, domain=domain)
        except ProfileError as error:
            self.problem = str(error)
            return None

    def tune_report(self) -> LoopReport | None:
        """The compare report of the tune folder the pair came from (`sources.tune_folder`); None for other pairs."""
        folder = sources.tune_folder(self.before, self.after) if self.is_pair else None
        if folder is None:
            return None

        def read() -> LoopReport | None:
            try:
                return sources.read_tune_report(folder, self.runs_dir)
            except ProfileError as error:
                self.problem = str(error)
                return None

        return self._cached("tune report", read)

    def memory_table(self) -> pd.DataFrame:
        """Every side's memory rows (`tables.memory_table`) with a ``side`` column."""
        return self._cached("memory", lambda: self._stacked(tables.memory_table))

    def memory_notes(self) -> list[str]:
        """Per side, where its memory comes from, or why it has none (`aitune.report.memory`), named."""
        return [
            f"{shown_name(loaded.name)}: {memory_source(loaded.doc) or memory_note(loaded.doc)}"
            for loaded in self.sides().values()
        ]

    def warning_table(self) -> pd.DataFrame:
        """Every warning with a ``status``: ``present`` (one profile), or ``new``, ``gone``, ``persisting``."""
        return self._cached(("warnings", self.comparison("cpu") is not None), self._warnings)

    def comparison(self, domain: str) -> compare.ProfileDiff | None:
        """`aitune.compare`'s diff of the pair in ``domain`` once `compare_now` has computed it, else None."""
        return self._cache.get(("diff", self._domain(domain))) if self.is_pair else None

    def compare_now(self, domain: str) -> compare.ProfileDiff | None:
        """Compute (or reuse) the pair's diff in ``domain``, then bump ``compared`` so views redraw.

        Kept off the page build: compare bootstraps an interval for every region (about a quarter
        of a second for 500 regions), and the charts need none of it.
        """
        if not self.is_pair:
            return None
        diff = self._cached(("diff", self._domain(domain)), lambda: self._compare(self._domain(domain)))
        self.compared += 1
        return diff

    def _compare(self, domain: str) -> compare.ProfileDiff | None:
        try:
            return compare.compare_profiles(self.before.doc, self.after.doc, domain=domain, scenario=self.scenario)
        except ProfileError as error:
            self.problem = str(error)
            return None

    def _domain(self, domain: str) -> str:
        return domain if domain == "cpu" or self.has_device_time() else "cpu"

    def _operator_changes(self, domain: str) -> pd.DataFrame:
        before, after = self.pair()
        rows = compare.operator_changes(before.doc, after.doc, domain, limit=OPERATOR_ROWS)
        data = [[row.key, row.device_type, row.before_us, row.after_us, row.delta_us] for row in rows]
        return pd.DataFrame(data, columns=tables.OPERATOR_CHANGE_COLUMNS)

    def _warnings(self) -> pd.DataFrame:
        if not self.is_pair:
            return self._stacked(tables.warning_table).assign(**{Column.STATUS: "present"})
        diff = self.comparison("cpu")
        if diff is None:  # not compared yet: the view says so
            return pd.DataFrame(columns=[*tables.WARNING_COLUMNS, Column.STATUS])
        gone, new = (
            msgspec.convert(found, list[DocumentWarning])
            for found in (diff.warnings_only_before, diff.warnings_only_after)
        )
        new_codes = {warning.code for warning in new}
        persisting = [w for w in as_profile(self.pair()[1].doc).warnings if w.code not in new_codes]
        groups = {"gone": gone, "new": new, "persisting": persisting}
        frames = [
            pd.DataFrame([(w.code, w.message, w.source) for w in found], columns=tables.WARNING_COLUMNS).assign(
                **{Column.STATUS: status}
            )
            for status, found in groups.items()
        ]
        return pd.concat(frames, ignore_index=True)

    def run_indices(self, side: str) -> list[int]:
        """The measured runs of one side."""
        loaded = self.sides().get(side)
        return tables.run_indices(loaded.doc) if loaded else []

    def trace_path(self, side: str) -> Path | None:
        """The Chrome trace beside one side's profile, when the runs folder has it."""
        loaded = self.sides().get(side)
        return loaded.trace_path if loaded else None

    def timeline(self, side: str, run: int) -> pd.DataFrame:
        """Region spans of one run of one side, from its trace; empty without a trace.

        `ProfileError` in one sentence when the trace is unreadable or malformed: only the timeline
        needs the trace, so only the timeline says so (``problem`` is for the profiles themselves).
        """
        events = self._trace_events(side)
        return tables.timeline(events, run) if events else pd.DataFrame(columns=tables.TIMELINE_COLUMNS)

    def _trace_events(self, side: str) -> TraceEvents | None:
        path = self.trace_path(side)
        if path is None:
            return None
        name = path.relative_to(self.runs_dir.resolve()).as_posix()
        return self._cached(("trace", side), lambda: sources.read_trace_file(path, name))

    def _stacked(self, derive: Callable[[Any], pd.DataFrame]) -> pd.DataFrame:
        frames = [_on_side(derive(loaded.doc), side) for side, loaded in self.sides().items()]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def _cached(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]


def _on_side(frame: pd.DataFrame, side: str) -> pd.DataFrame:
    """``frame`` with a `Column.SIDE` column saying which profile of the pair its rows come from."""
    return frame.assign(**{Column.SIDE: side})
