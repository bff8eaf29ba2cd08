"""The viewer's panels, one per concern: each gets the store and the selection and only lays out.

Profile text (region names, warning messages, operator keys) may come from a stranger, so it goes
through the terminal's door (`aitune.report.safe_text`): escaped, control and bidi characters spelled
out, before it reaches an HTML pane; in tables shown as plain text, long names cut (`shown_name`).
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import panel as pn
import param
from bokeh.models import NumberFormatter

from aitune.errors import ProfileError
from aitune.report.document import operator_runs_note
from aitune.report.formatting import MISSING, SHARE_DECIMALS, SPEEDUP_DECIMALS, numeral
from aitune.report.safe_text import MAX_NAME_CHARS, html_name, html_text, shown_name
from aitune.viewer import figures
from aitune.viewer.selection import Selection
from aitune.viewer.store import ProfileStore
from aitune.viewer.tables import RUN_TIMES, Column, time_column

PLAIN_TEXT = {"type": "plaintext"}  # Tabulator's formatter that escapes cell text
WRAPPED_TEXT = {"type": "textarea"}  # escapes too, and wraps the text over lines
WRAPPED_WIDTH = 400  # px: a wrapped column needs a width to wrap within; a sentence takes two or three lines
MAX_WRAPPED_CHARS = 2000  # a wrapped message (a warning, a reason) is cut past this, as a name is past its limit
MEDIAN_RUN = "median run of each side"


def number_format(decimals: int) -> NumberFormatter:
    """Digits grouped (12,345.6), ``-`` where a side has no value."""
    return NumberFormatter(format=numeral(decimals, grouped=True), nan_format=MISSING, null_format=MISSING)


def text_block(text: str, css_class: str = "aitune-text") -> pn.pane.HTML:
    """An HTML pane showing ``text`` verbatim (`html_text`: escaped, controls spelled out), never as markup."""
    return pn.pane.HTML(f'<div class="{css_class}">{html_text(text)}</div>', sizing_mode="stretch_width")


def labelled(names: Iterable[str]) -> dict[str, str]:
    """A select's options for names from a document or a folder: each shown as `shown_name` gives it (spelled out,
    cut), each choosing the name itself."""
    return {shown_name(name): name for name in names}


def speedup_format(missing: str = MISSING) -> NumberFormatter:
    """A speedup (before ÷ after, or an end-to-end bound) with `factor`'s decimals; ``missing`` where there is none."""
    return NumberFormatter(format=numeral(SPEEDUP_DECIMALS), nan_format=missing, null_format=missing)


def share_format() -> NumberFormatter:
    """A fraction of the run as a percentage with `percent`'s decimals."""
    return NumberFormatter(format=numeral(SHARE_DECIMALS, percent=True), nan_format=MISSING, null_format=MISSING)


def table(
    frame: pd.DataFrame,
    text_columns: list[str],
    name: str,
    page_size: int = 25,
    formatters: Mapping[str, Any] | None = None,
    titles: Mapping[str, str] | None = None,
) -> pn.widgets.Tabulator:
    """A read-only, sortable Tabulator with header filters on the text columns, text shown as text.

    Columns are formatted by their names: ``*_us`` (µs), ``*_calls``, ``*_speedup`` (× figures)
    and ``share*``; ``formatters`` overrides that per column (`WRAPPED_TEXT` for long messages);
    ``titles`` gives a column a shorter header than its name. Any other column of text (a document may
    add one: an operator row's extra key) is shown as text too, and every title passes `html_name`:
    Tabulator writes a column's title, and the tooltip that repeats it, into the page as HTML.
    """
    present = [column for column in text_columns if column in frame.columns]
    chosen = {**formatters} if formatters else {}
    by_name = {
        **{column: number_format(1) for column in frame.columns if str(column).endswith("_us")},
        **{column: number_format(0) for column in frame.columns if str(column).endswith("_calls")},
        **{column: speedup_format() for column in frame.columns if str(column).endswith("_speedup")},
        **{column: share_format() for column in frame.columns if str(column).startswith("share")},
    }
    unnamed = [
        column
        for column in frame.columns
        if not pd.api.types.is_numeric_dtype(frame[column]) and column not in (*present, *chosen, *by_name)
    ]
    wrapped = [column for column, formatter in chosen.items() if formatter == WRAPPED_TEXT and column in frame]
    return pn.widgets.Tabulator(
        shown_text_columns(frame, [*present, *unnamed], wrapped),
        disabled=True,
        show_index=False,
        pagination="local",
        page_size=page_size,
        formatters={**by_name, **{column: PLAIN_TEXT for column in [*present, *unnamed]}, **chosen},
        widths={column: WRAPPED_WIDTH for column, formatter in chosen.items() if formatter == WRAPPED_TEXT},
        titles={column: html_name((titles or {}).get(column, column)) for column in frame.columns},
        header_filters={column: {"type": "input", "func": "like"} for column in present},
        sizing_mode="stretch_width",
        css_classes=[name],
    )


def shown_text_columns(frame: pd.DataFrame, names: list[str], messages: list[str]) -> pd.DataFrame:
    """``frame`` with its text columns as they may be shown: ``names`` cut (`shown_name`), ``messages``
    spelled out and cut at `MAX_WRAPPED_CHARS`; the same frame when there are none. A value that is neither
    text nor a number (a list or an object under an operator row's extra key) is shown as its text."""
    if frame.empty or not (names or messages):
        return frame
    shown = frame.copy()
    for columns, limit in ((names, MAX_NAME_CHARS), (messages, MAX_WRAPPED_CHARS)):
        for column in columns:
            shown[column] = [_shown_cell(value, limit) for value in shown[column]]
    return shown


def _shown_cell(value: object, limit: int) -> object:
    if value is None or isinstance(value, numbers.Number | np.generic):  # a frame holds numpy's numbers
        return value
    return shown_name(value, limit)


class StoreView(pn.viewable.Viewer):
    """A view: reads the store and the selection, lays out, computes nothing."""

    store = param.ClassSelector(class_=ProfileStore)
    selection = param.ClassSelector(class_=Selection)

    def shown(self) -> tuple[param.Parameter, ...]:
        """The store parameters that change what is shown (the profiles and the scenario), for `pn.bind`."""
        return self.store.param.before, self.store.param.after, self.store.param.scenario

    def rendered(self, *also: param.Parameter) -> pn.viewable.Viewable:
        """``self._render`` re-run whenever what is shown, or any of ``also``, changes."""
        return pn.panel(pn.bind(self._render, *self.shown(), *also))  # type: ignore[attr-defined]


class Problem(StoreView):
    """The last loading problem, as one sentence above everything else."""

    def __panel__(self) -> pn.viewable.Viewable:
        return pn.panel(pn.bind(self._render, self.store.param.problem))

    @staticmethod
    def _render(problem: str) -> pn.viewable.Viewable:
        return text_block(problem, "aitune-problem") if problem else pn.Spacer(height=0)


class RegionShares(StoreView):
    """Grouped bars per region and side: the share of one profile's run, a pair's time per run (ms)."""

    def __panel__(self) -> pn.viewable.Viewable:
        return self.rendered(self.selection.param.domain)

    def _render(self, *_: object) -> pn.viewable.Viewable:
        domain = self.selection.domain if self.store.has_device_time() else "cpu"
        regions = self.store.region_table(domain)
        if regions.empty:
            return text_block("No regions to show.")
        measure = "time" if self.store.is_pair else "share"
        note = text_block(
            "Hatched bars are managed (tuned) regions; plain bars are untuned; the dotted bar is the residual "
            "(time outside every region). Bars line up by region path, as aitune.compare lines regions up."
            + (
                " A pair is drawn in ms per run, its share on hover: a region that got faster can take a larger"
                " share of a shorter run."
                if measure == "time"
                else ""
            )
        )
        plot = figures.region_bars(regions, domain, measure)
        return pn.Column(note, pn.pane.Bokeh(plot), sizing_mode="stretch_width")


class RunTiming(StoreView):
    """Per-run times of each side; outlier runs marked."""

    metric = param.Selector(default="wall", objects=list(RUN_TIMES))

    def __panel__(self) -> pn.viewable.Viewable:
        picker = pn.widgets.RadioButtonGroup.from_param(self.param.metric, color="light")
        plot = pn.bind(self._render, *self.shown(), self.param.metric)
        return pn.Column(picker, plot, sizing_mode="stretch_width")

    def _render(self, *_: object) -> pn.viewable.Viewable:
        runs = self.store.run_table()
        if runs.empty:
            return text_block("No runs to show.")
        metric = self.metric if runs[time_column(self.metric)].notna().all() else "wall"
        return pn.pane.Bokeh(figures.run_points(runs, metric))


class Operators(StoreView):
    """The key-averages tables of both sides, sortable and filterable."""

    def __panel__(self) -> pn.viewable.Viewable:
        return self.rendered(self.selection.param.domain)

    def _render(self, *_: object) -> pn.viewable.Viewable:
        pair_note = "Self time per run (µs) on each side and after − before, from aitune.compare."
        notes = [pair_note] if self.store.is_pair else []
        notes += [
            f"{shown_name(loaded.name)}: {where}"
            for loaded in self.store.sides().values()
            if (where := operator_runs_note(loaded.doc)) is not None
        ]
        note = "\n".join(notes)
        operators = table(
            self.store.operator_table(self.selection.domain),
            [Column.KEY, Column.DEVICE_TYPE, Column.SIDE],
            "operator-table",
        )
        return pn.Column(text_block(note), operators, sizing_mode="stretch_width") if note else operators


class RegionTree(StoreView):
    """Nested regions with total and self time, one run per side, before and after side by side by path."""

    max_depth = param.Integer(default=3, bounds=(0, 16), doc="deepest level listed (0: topmost regions only)")

    def __panel__(self) -> pn.viewable.Viewable:
        depth = pn.widgets.IntInput.from_param(self.param.max_depth, label="Deepest level", width=120)
        runs = pn.bind(self._run_picker, *self.shown())
        body = pn.bind(
            self._render,
            *self.shown(),
            self.selection.param.domain,
            self.selection.param.tree_run,
            self.param.max_depth,
        )
        return pn.Column(pn.Row(runs, depth), body, sizing_mode="stretch_width")

    def _run_picker(self, *_: object) -> pn.widgets.Select:
        runs = {
            f"run {index}": index
            for index in sorted({*self.store.run_indices("before"), *self.store.run_indices("after")})
        }
        chosen = next((label for label, index in runs.items() if index == self.selection.tree_run), MEDIAN_RUN)
        picker = pn.widgets.Select(label="Run", options=[MEDIAN_RUN, *runs], value=chosen, width=200)
        picker.param.watch(lambda event: setattr(self.selection, "tree_run", runs.get(event.new)), "value")
        return picker

    def _render(self, *_: object) -> pn.viewable.Viewable:
        if not self.store.has_tree():
            return text_block("No nested regions in this profile (captured with max_depth=1, or no region nests).")
        domain = self.selection.domain if self.store.has_device_time() else "cpu"
        runs = self.store.tree_runs(domain, self.selection.tree_run)
        rows = self.store.tree_table(domain, self.selection.tree_run)
        shown = rows[rows[Column.DEPTH] <= self.max_depth].drop(columns=[Column.PATH, Column.DEPTH])
        note = text_block(
            f"{domain} time (µs) of one run per side ("
            + ", ".join(f"{side}: run {index}" for side, index in runs.items())
            + "); total includes the nested regions, self is what none of them accounts for."
        )
        return pn.Column(note, table(shown, [Column.REGION], "tree-table", page_size=50), sizing_mode="stretch_width")


ALL_RANKS = "all ranks"


class Ranks(StoreView):
    """A merged profile's ranks: a chart of the run time (or a region) per rank, a rank picker and its regions."""

    def __panel__(self) -> pn.viewable.Viewable:
        pickers = pn.bind(self._pickers, *self.shown())
        body = pn.bind(self._render, *self.shown(), self.selection.param.rank, self.selection.param.rank_quantity)
        return pn.Column(pickers, body, sizing_mode="stretch_width")

    def _pickers(self, *_: object) -> pn.viewable.Viewable:
        ranks = self.store.rank_table()
        if ranks.empty:
            return pn.Spacer(height=0)
        choices = {ALL_RANKS: None, **{f"rank {rank}": int(rank) for rank in sorted(set(ranks[Column.RANK]))}}
        chosen = next((label for label, rank in choices.items() if rank == self.selection.rank), ALL_RANKS)
        rank = pn.widgets.Select(
            label="Rank", options=list(choices), value=chosen, width=200, css_classes=["rank-pick"]
        )
        rank.param.watch(lambda event: setattr(self.selection, "rank", choices.get(event.new)), "value")
        quantities = list(dict.fromkeys(self.store.rank_region_table()[Column.REGION_ID]))
        value = self.selection.rank_quantity if self.selection.rank_quantity in quantities else quantities[0]
        chart = pn.widgets.Select(label="Chart", options=labelled(quantities), value=value, width=320)
        chart.param.watch(lambda event: setattr(self.selection, "rank_quantity", event.new), "value")
        return pn.Row(rank, chart)

    def _render(self, *_: object) -> pn.viewable.Viewable:
        ranks = self.store.rank_table()
        if ranks.empty:
            return text_block("Not a merged profile: merge a distributed capture with `aitune-profile merge DIR`.")
        quantities = self.store.rank_region_table()
        chosen = self.selection.rank_quantity
        quantity = chosen if chosen in set(quantities[Column.REGION_ID]) else quantities[Column.REGION_ID].iloc[0]
        note = text_block(
            "Each run of a merged profile is its step's slowest rank. Medians over runs per rank; imbalance is "
            "max ÷ median across ranks."
        )
        parts = [note, pn.pane.Bokeh(figures.rank_bars(quantities, quantity))]
        if self.selection.rank is None:
            parts.append(table(ranks, [Column.STRAGGLER_REGION, Column.SIDE], "rank-table"))
        else:
            picked = quantities[quantities[Column.RANK] == self.selection.rank]
            ratio = {Column.IMBALANCE: number_format(2)}
            listed = [Column.REGION_ID, Column.SIDE]
            parts.append(table(picked, listed, "rank-region-table", page_size=50, formatters=ratio))
        return pn.Column(*parts, sizing_mode="stretch_width")


class Phases(StoreView):
    """A generate's phases (encoder, prefill, decode) per side: their time and share, each phase's regions,
    the token figures and how the split was decided."""

    def __panel__(self) -> pn.viewable.Viewable:
        return self.rendered()

    def _render(self, *_: object) -> pn.viewable.Viewable:
        phases = self.store.phase_table()
        if phases.empty:
            return text_block("No phases: the runs are not a generate (no module called once per new token).")
        formats = {Column.TIME_US: number_format(1), Column.FRACTION: share_format()}
        lines = [text_block(line) for line in self.store.phase_lines()]
        listed = [Column.PHASE, Column.ROW, Column.TIME_US, Column.FRACTION, Column.TOKENS, Column.SIDE]
        grid = table(phases, listed, "phase-table", formatters=formats)
        return pn.Column(*lines, grid, sizing_mode="stretch_width")


class Memory(StoreView):
    """Bytes allocated, freed and peak live per region and device, each side's rows marked; where they come from."""

    def __panel__(self) -> pn.viewable.Viewable:
        return self.rendered()

    def _render(self, *_: object) -> pn.viewable.Viewable:
        note = text_block("\n".join(self.store.memory_notes()))
        memory = self.store.memory_table()
        if memory.empty:
            return note
        grid = table(memory, [Column.PATH, Column.DEVICE, Column.SIDE], "memory-table")
        return pn.Column(note, grid, sizing_mode="stretch_width")


class Warnings(StoreView):
    """Each warning with its code, message and source; for a pair, whether it is new, gone or persisting."""

    def __panel__(self) -> pn.viewable.Viewable:
        return self.rendered(self.store.param.compared)

    def _render(self, *_: object) -> pn.viewable.Viewable:
        if self.store.is_pair and self.store.comparison("cpu") is None:
            return text_block("Comparing with aitune.compare…")
        warnings = self.store.warning_table()
        if warnings.empty:
            return text_block("No warnings: the capture reported nothing suspicious.")
        return table(
            warnings, [Column.CODE, Column.MESSAGE, Column.SOURCE, Column.SIDE, Column.STATUS], "warning-table"
        )


class Timeline(StoreView):
    """One lane per region for one run of one side, from the Chrome trace, with the trace to download."""

    def __panel__(self) -> pn.viewable.Viewable:
        side = pn.widgets.RadioButtonGroup.from_param(self.selection.param.timeline_side, color="light")
        run = pn.widgets.IntInput.from_param(self.selection.param.run, width=120)
        body = pn.bind(
            self._render,
            *self.shown(),
            self.selection.param.timeline_side,
            self.selection.param.run,
        )
        return pn.Column(pn.Row(side, run), body, sizing_mode="stretch_width")

    def _render(self, *_: object) -> pn.viewable.Viewable:
        side, run = self.selection.timeline_side, self.selection.run
        path = self.store.trace_path(side)
        if path is None:
            return text_block(f"No Chrome trace beside the {side} profile in the runs folder, so no timeline.")
        if run not in self.store.run_indices(side):
            return text_block(f"The {side} profile has no run {run}; runs are {self.store.run_indices(side)}.")
        try:
            spans = self.store.timeline(side, run)
        except ProfileError as error:
            return text_block(str(error), "aitune-problem timeline-problem")
        title = f"{side}: regions of run {run}"
        label = f"Download {shown_name(path.name)} (Perfetto)"
        download = pn.widgets.FileDownload(file=str(path), filename=path.name, label=label)
        return pn.Column(pn.pane.Bokeh(figures.timeline_bars(spans, title)), download, sizing_mode="stretch_width")


class Efficiency(StoreView):
    """Work per region on the machine's roofline, and the table of FLOPs, rates and uncounted time."""

    def __panel__(self) -> pn.viewable.Viewable:
        return self.rendered()

    def _render(self, *_: object) -> pn.viewable.Viewable:
        regions = self.store.efficiency_table()
        if regions.empty:
            return text_block(
                "No work per region in this profile: a full capture records the operators' shapes in its operator "
                "runs (lite captures and traces without recorded shapes have none)."
            )
        note = (
            "Counted work: matrix products, convolutions and attention (FLOPs from the recorded shapes). "
            "Uncounted time has no formula: not zero work. % of roof: the time the work needs at this machine's "
            "measured peaks ÷ the time it took."
        )
        shown = regions.assign(**{Column.SHARE_OF_ROOF: regions[Column.FRACTION_OF_ROOF]}).drop(
            columns=[Column.FRACTION_OF_ROOF]
        )
        listed = table(shown, [Column.REGION_ID, Column.DOMAIN, Column.BOUND, Column.SIDE], "efficiency-table")
        plot = pn.pane.Bokeh(figures.roofline(regions, self.store.machine_peaks()), sizing_mode="stretch_width")
        return pn.Column(text_block(note), plot, listed, sizing_mode="stretch_width")
