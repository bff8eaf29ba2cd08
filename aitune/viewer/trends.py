"""The History tab: a history database's run time and largest rows over stored runs, and two runs, clicked on
the chart or chosen in the pickers, opened as the pair every other tab shows.

A history file may come from a stranger, as a profile may: it is named inside the runs folder
(`sources.resolve_inside`), opened read-only without trusting the SQL it holds
(`aitune.history.database.open_read_only`), and a stored profile reaches the page only through the
viewer's bounded reader and the schema, as an upload does. SQLAlchemy loads when the tab first reads a history.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import panel as pn
import param

from aitune.errors import HistoryError, ProfileError
from aitune.history.trend import SHORT_COMMIT, top_paths
from aitune.report.formatting import MISSING
from aitune.report.safe_text import shown_name
from aitune.viewer import figures, sources
from aitune.viewer.store import ProfileStore
from aitune.viewer.tables import Column
from aitune.viewer.views import labelled, text_block

if TYPE_CHECKING:
    from aitune.history.store import HistoryStore, TrendPoint, Workload

TREND_RUNS = 50
"""Stored runs of a workload drawn, the latest (as `history show`)."""
TREND_ROWS = 5
"""Rows drawn besides the run time: the largest in the latest run (as `history show --top`)."""
NONE = "(none)"
TREND_COLUMNS = [Column.POSITION, Column.RUN_ID, Column.COMMIT, Column.RECORDED, Column.PATH, Column.MS]
PICKED_CLASS = "aitune-text history-picked"
PICK_TWO = "Click two points (or pick two runs) to open them as a pair in the other tabs, the older as before."


def trend_frame(points: Sequence[TrendPoint], top: int = TREND_ROWS) -> pd.DataFrame:
    """One row per stored run and drawn row (the run time and the ``top`` largest, `top_paths`): the run's
    position (oldest 0), id, short commit and time recorded, the row's path and its median in ms."""
    rows = [
        (position, point.id, (point.commit or MISSING)[:SHORT_COMMIT], point.recorded_at[:19], path, value / 1000)
        for path in top_paths(points, top)
        for position, point in enumerate(points)
        if (value := point.medians.get(path)) is not None
    ]
    return pd.DataFrame(rows, columns=TREND_COLUMNS)


def run_label(point: TrendPoint) -> str:
    """How a picker names a stored run: its id, commit and when it was recorded."""
    return f"run {point.id} · {shown_name((point.commit or MISSING)[:SHORT_COMMIT])} · {point.recorded_at[:16]}"


def open_history(root: Path, name: str) -> HistoryStore:
    """The history file ``name`` inside the runs folder, read-only; `ProfileError` or `HistoryError` in one sentence."""
    from aitune.history.database import open_read_only

    return open_read_only(sources.resolve_inside(root, name), shown_name(name))


class HistoryTrends(pn.viewable.Viewer):
    """Pick a history in the runs folder and a workload; its trend; two runs picked open as the store's pair."""

    store = param.ClassSelector(class_=ProfileStore)
    history = param.String(default=None, allow_None=True, doc="the history file shown, inside the runs folder")
    workload = param.String(default=None, allow_None=True, doc="the workload and machine kind shown")
    opened = param.Callable(default=None, doc="called once a pair is opened (the page shows its tabs)")

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._picked: list[int] = []  # the runs clicked, the latest last

    def __panel__(self) -> pn.viewable.Viewable:
        names = sources.list_histories(self.store.runs_dir)
        shown = self.history if self.history in names else NONE
        picker = pn.widgets.Select(label="History", options={NONE: NONE, **labelled(names)}, value=shown)
        picker.param.watch(lambda event: self.param.update(history=None if event.new == NONE else event.new), "value")
        body = pn.bind(self._render, self.param.history, self.param.workload)
        return pn.Column(picker, body, sizing_mode="stretch_width", css_classes=["history-trends"])

    def _render(self, *_: object) -> pn.viewable.Viewable:
        if self.history is None:
            return text_block(
                "Pick a history database in the runs folder (a file `aitune-profile history add --db` wrote)."
            )
        try:
            with open_history(self.store.runs_dir, self.history) as history:
                workloads = history.workloads()
                chosen = self._chosen(workloads)
                points = history.trend(chosen.workload, chosen.machine, TREND_RUNS) if chosen else []
        except (HistoryError, ProfileError) as error:
            return text_block(str(error), "aitune-problem history-problem")
        if chosen is None:
            return text_block("This history holds no runs yet.")
        return pn.Column(self._workload_picker(workloads, chosen), *self._trend(points), sizing_mode="stretch_width")

    def _chosen(self, workloads: Sequence[Workload]) -> Workload | None:
        keyed = {_key(item): item for item in workloads}
        return keyed.get(self.workload or "", next(iter(workloads), None))

    def _workload_picker(self, workloads: Sequence[Workload], chosen: Workload) -> pn.widgets.Select:
        options = {f"{shown_name(item.label)} · {item.runs} run(s) · {item.workload}": _key(item) for item in workloads}
        picker = pn.widgets.Select(label="Workload", options=options, value=_key(chosen), width=420)
        picker.param.watch(lambda event: setattr(self, "workload", event.new), "value")
        return picker

    def _trend(self, points: Sequence[TrendPoint]) -> list[pn.viewable.Viewable]:
        plot = figures.trend_lines(trend_frame(points))
        source = plot.select_one({"name": figures.TREND_POINTS}).data_source
        runs = {run_label(point): point.id for point in reversed(points)}
        before = pn.widgets.Select(label="Before run", options=runs, width=320, css_classes=["history-before"])
        after = pn.widgets.Select(label="After run", options=runs, width=320, css_classes=["history-after"])
        if len(points) > 1:
            before.value, after.value = points[-2].id, points[-1].id
        button = pn.widgets.Button(label="Open pair", color="primary", css_classes=["history-open"])
        button.on_click(lambda _: self.open_pair(before.value, after.value))

        picked = text_block(PICK_TWO, PICKED_CLASS)

        def clicked(_attr: str, _old: list[int], new: list[int]) -> None:
            if new:
                picked.object = text_block(
                    self._pick(int(source.data[figures.TREND_RUN][new[-1]])), PICKED_CLASS
                ).object

        source.selected.on_change("indices", clicked)
        return [picked, pn.pane.Bokeh(plot, sizing_mode="stretch_width"), pn.Row(before, after, button)]

    def _pick(self, run_id: int) -> str:
        """Count a clicked run; the second opens the pair. What the page says next."""
        self._picked = [*[run for run in self._picked if run != run_id], run_id][-2:]
        if len(self._picked) < 2:
            return f"Run {run_id} picked: click a second point to open the two as a pair."
        first, second = self._picked
        self._picked = []
        self.open_pair(first, second)
        return PICK_TWO

    def open_pair(self, first: int | None, second: int | None) -> None:
        """Open two stored runs as the store's pair, the older (smaller id) as before; ``problem`` on failure."""
        if first is None or second is None or first == second:
            self.store.problem = "Pick two different stored runs to compare."
            return
        older, newer = sorted((first, second))
        try:
            with open_history(self.store.runs_dir, self.history) as history:
                found = {f"{self.history} run {run}": history.document(run) for run in (older, newer)}
        except (HistoryError, ProfileError) as error:
            self.store.problem = str(error)
            return
        missing = [name for name, data in found.items() if data is None]
        if missing:
            self.store.problem = f"{shown_name(missing[0])} is no longer stored; pick runs the chart shows."
            return
        if self.store.open_uploads(found) and self.opened is not None:  # type: ignore[arg-type]
            self.opened()


def _key(workload: Workload) -> str:
    return f"{workload.workload}/{workload.machine}"
