"""`history report --format html`: the trends of every workload as one self-contained page (no script, no
network), laid out by `aitune.report.html` with its escaping, bounds and Content-Security-Policy."""

from __future__ import annotations

from collections.abc import Sequence

from aitune.history.record import RUN_TIME
from aitune.history.store import TrendPoint, Workload
from aitune.history.trend import SHORT_COMMIT, top_paths, values_of
from aitune.report.formatting import MISSING, ms
from aitune.report.html import Html, Section, paragraph, render_page, table
from aitune.report.svg import sparkline_svg


def trend_section(workload: Workload, points: Sequence[TrendPoint], top: int) -> Section:
    """One workload: a sparkline per row (the run time and the ``top`` largest rows), then each run's commit."""
    rows = []
    for path in top_paths(points, top):
        values = values_of(points, path)
        present = [value for value in values if value is not None]
        rows.append((path, Html(sparkline_svg(f"{path} (ms)", values)), ms(present[0]), ms(present[-1])))
    runs = [
        (str(p.id), p.recorded_at[:19], (p.commit or MISSING)[:SHORT_COMMIT], ms(p.medians.get(RUN_TIME)))
        for p in reversed(points)
    ]
    body = Html(
        paragraph(f"{len(points)} run(s); workload {workload.workload}, machine kind {workload.machine}")
        + table(("row", "trend", "first ms", "latest ms"), rows)
        + table(("run", "recorded (UTC)", "commit", "run time ms"), runs)
    )
    return Section(workload.label, body, "trend")


def trend_page(store_name: str, trends: Sequence[tuple[Workload, Sequence[TrendPoint]]], top: int) -> str:
    """The page: one section per workload, most recently recorded first."""
    return render_page("aitune history", [trend_section(w, points, top) for w, points in trends], subtitle=store_name)
