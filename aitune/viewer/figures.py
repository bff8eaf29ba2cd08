"""Bokeh figures as plain functions of the store's tables: no state, no I/O, text drawn as text.

Bokeh draws factors, legends and titles on the canvas and escapes a tooltip's ``@field`` values (none
here is ``{safe}``, and every tooltip is a list of fields, never an HTML template), so region names from
a stranger's profile cannot inject markup here; they are drawn as `shown_name` gives them (bidi and
zero-width characters spelled out, a long name cut), so none reverses or crowds out the figures beside
it. A title or axis label is typeset as mathematics between ``$$``: a name placed there passes `chart_text`.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
from bokeh.models import ColumnDataSource, FactorRange, HoverTool
from bokeh.plotting import figure

from aitune.report.formatting import percent
from aitune.report.model import MachinePeak
from aitune.report.safe_text import chart_text, shown_name
from aitune.viewer.tables import RESIDUAL, Column, time_column

BEFORE_COLOR, AFTER_COLOR = "#8c8c8c", "#1f77b4"
SIDE_COLORS = {"before": BEFORE_COLOR, "after": AFTER_COLOR}
KIND_HATCH = {"managed": "/", "untuned": " ", "residual": "."}
MAX_BARS = 40
"""Regions drawn in the bar chart (largest first); the tables below the chart list all of them."""

_TOOLS = "pan,wheel_zoom,box_zoom,reset,save"


MEASURES = {
    "time": ("ms", "Time per region in a run ({domain}, median over runs)", "ms of {domain} time per run"),
    "share": ("percent", "Share of {domain} time per region (median over runs)", "% of run {domain} time"),
}
"""What the region bars measure: (column drawn, title, axis label)."""


def top_paths(regions: pd.DataFrame, limit: int = MAX_BARS, column: str = Column.FRACTION) -> list[str]:
    """The ``limit`` region paths with the largest ``column`` on either side, residual always included."""
    largest = regions[regions[Column.PATH] != RESIDUAL].groupby(Column.PATH, sort=False)[column].max()
    return [*largest.sort_values(ascending=False).index[:limit], RESIDUAL]


def region_bars(regions: pd.DataFrame, domain: str, measure: str = "share") -> figure:
    """Grouped horizontal bars: per region path one bar per side; managed regions hatched, residual dotted.

    ``measure`` is ``share`` (% of the run) or ``time`` (ms per run, what a before/after pair needs:
    a region that got faster can take a larger share of a shorter run); the tooltip gives both.
    """
    drawn, title, axis = MEASURES[measure]
    paths = top_paths(regions, column=Column.TIME_US if measure == "time" else Column.FRACTION)
    shown = regions[regions[Column.PATH].isin(paths)]
    shown = shown.assign(**{Column.PATH: shown[Column.PATH].map(shown_name)})
    paths = [shown_name(path) for path in paths]
    sides = list(dict.fromkeys(shown[Column.SIDE]))
    factors = [(path, side) for path in reversed(paths) for side in sides]
    source = ColumnDataSource(
        {
            "y": [(path, side) for path, side in zip(shown[Column.PATH], shown[Column.SIDE], strict=True)],
            "percent": (shown[Column.FRACTION] * 100).tolist(),
            "ms": (shown[Column.TIME_US] / 1000).tolist(),
            "path": shown[Column.PATH].tolist(),
            "side": shown[Column.SIDE].tolist(),
            "kind": shown[Column.KIND].tolist(),
            "color": [SIDE_COLORS[side] for side in shown[Column.SIDE]],
            "hatch": [KIND_HATCH[kind] for kind in shown[Column.KIND]],
        }
    )
    plot = figure(
        y_range=FactorRange(*factors),
        height=max(240, 22 * len(factors) + 60),
        sizing_mode="stretch_width",
        title=title.format(domain=domain),
        x_axis_label=axis.format(domain=domain),
        tools=_TOOLS,
        name="region-bars",
    )
    plot.hbar(
        y="y",
        right=drawn,
        height=0.8,
        source=source,
        color="color",
        hatch_pattern="hatch",
        hatch_color="white",
        legend_field="side",
    )
    plot.add_tools(
        HoverTool(
            tooltips=[
                ("region", "@path"),
                ("side", "@side"),
                ("kind", "@kind"),
                ("share", "@percent{0.0}%"),
                ("time", "@ms{0.00} ms"),
            ]
        )
    )
    plot.yaxis.group_label_orientation = "horizontal"
    plot.legend.location = "bottom_right"
    return plot


def run_points(runs: pd.DataFrame, metric: str) -> figure:
    """Per-run ``metric`` (wall/cpu/device, in ms) per side; outlier runs drawn as red crosses."""
    column = time_column(metric)
    plot = figure(
        height=280,
        sizing_mode="stretch_width",
        title=f"{metric} time per measured run",
        x_axis_label="run index",
        y_axis_label="ms",
        tools=_TOOLS,
        name="run-points",
    )
    for side, group in runs.groupby(Column.SIDE, sort=False):
        source = ColumnDataSource(
            {
                "run": group[Column.RUN_INDEX].tolist(),
                "ms": (group[column] / 1000).tolist(),
                "outlier": group[Column.OUTLIER].map(_yes_no).tolist(),
            }
        )
        plot.scatter("run", "ms", source=source, size=9, color=SIDE_COLORS[str(side)], legend_label=str(side))
    marked = runs[runs[Column.OUTLIER]]
    if not marked.empty:
        plot.scatter(
            marked[Column.RUN_INDEX],
            marked[column] / 1000,
            marker="x",
            size=16,
            color="#d62728",
            line_width=2,
            legend_label="outlier",
        )
    plot.add_tools(HoverTool(tooltips=[("run", "@run"), ("time", "@ms{0.00} ms"), ("outlier", "@outlier")]))
    return plot


def timeline_bars(spans: pd.DataFrame, title: str) -> figure:
    """One lane per region, one bar per call, in ms from the start of the run (the source's fields are the
    spans' columns)."""
    spans = spans.assign(**{Column.LANE: spans[Column.LANE].map(shown_name)}) if len(spans) else spans
    lanes = list(dict.fromkeys(spans[Column.LANE]))
    plot = figure(
        y_range=FactorRange(*reversed(lanes)) if lanes else FactorRange("(no regions)"),
        height=max(160, 28 * len(lanes) + 70),
        sizing_mode="stretch_width",
        title=title,
        x_axis_label="ms from run start",
        tools=_TOOLS,
        name="timeline",
    )
    source = ColumnDataSource(spans.to_dict(orient="list"))
    plot.hbar(y=Column.LANE, left=Column.START_MS, right=Column.END_MS, height=0.7, source=source, color=AFTER_COLOR)
    plot.add_tools(
        HoverTool(
            tooltips=[
                ("region", f"@{Column.LANE}"),
                ("start", f"@{Column.START_MS}{{0.00}} ms"),
                ("duration", f"@{Column.DURATION_MS}{{0.00}} ms"),
            ]
        )
    )
    return plot


SLOWEST_COLOR = "#d62728"


def rank_bars(ranks: pd.DataFrame, quantity: str) -> figure:
    """One bar per rank and side: the median (ms) of ``quantity`` (the run time or a region) on that rank,
    the slowest rank of each side in red (`aitune.viewer.tables.rank_region_table`'s rows)."""
    shown = ranks[ranks[Column.REGION_ID] == quantity]
    sides = list(dict.fromkeys(shown[Column.SIDE]))
    factors = [(f"rank {rank}", side) for rank in dict.fromkeys(shown[Column.RANK]) for side in sides]
    slowest = shown[Column.RANK] == shown[Column.SLOWEST_RANK]
    source = ColumnDataSource(
        {
            "x": [(f"rank {rank}", side) for rank, side in zip(shown[Column.RANK], shown[Column.SIDE], strict=True)],
            "ms": (shown[Column.MEDIAN_US] / 1000).tolist(),
            "side": shown[Column.SIDE].tolist(),
            "slowest": slowest.map(_yes_no).tolist(),
            "color": [
                SLOWEST_COLOR if flag else SIDE_COLORS[side]
                for flag, side in zip(slowest, shown[Column.SIDE], strict=True)
            ],
        }
    )
    plot = figure(
        x_range=FactorRange(*factors),
        height=320,
        sizing_mode="stretch_width",
        title=f"{chart_text(quantity)} per rank (median over runs; the slowest rank in red)",
        y_axis_label="ms per run",
        tools=_TOOLS,
        name="rank-bars",
    )
    plot.vbar(x="x", top="ms", width=0.8, source=source, color="color")
    plot.add_tools(HoverTool(tooltips=[("rank", "@x"), ("median", "@ms{0.000} ms"), ("slowest", "@slowest")]))
    plot.xaxis.major_label_orientation = "vertical" if len(factors) > 16 else "horizontal"
    return plot


def _yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


ROOF_COLORS = ("#d62728", "#2ca02c", "#9467bd", "#8c564b")


def roofline(regions: pd.DataFrame, peaks: Mapping[str, Mapping[str, MachinePeak]]) -> figure:
    """Regions on a log-log roofline: arithmetic intensity (FLOP/byte) across, achieved FLOP/s up; the
    roofs of each side's machine (per backend and dtype, ``min(peak, intensity × bandwidth)``) as lines.

    Regions without counted work are left out (the table beside lists them with their uncounted time).
    """
    counted = regions[(regions[Column.FLOPS] > 0) & (regions[Column.COUNTED_US] > 0)]
    low = float(min(counted[Column.INTENSITY].min(), 0.1)) if not counted.empty else 0.1
    high = float(max(counted[Column.INTENSITY].max(), 1000.0)) if not counted.empty else 1000.0
    plot = figure(
        title="Regions on this machine's roofline (counted work, median over operator runs)",
        x_axis_type="log",
        y_axis_type="log",
        x_axis_label="arithmetic intensity (FLOP per byte moved)",
        y_axis_label="achieved FLOP/s",
        height=420,
        sizing_mode="stretch_width",
        tools=_TOOLS,
    )
    colors = iter(ROOF_COLORS * 8)
    for side, backends in peaks.items():
        for backend, roof in backends.items():
            bandwidth = roof.copy_bytes_per_s
            for dtype, peak in roof.gemm_flops_per_s.items():
                if peak <= 0 or bandwidth <= 0:
                    continue
                ridge = peak / bandwidth
                xs = [low / 2, min(max(ridge, low / 2), high * 2), high * 2]
                plot.line(
                    xs,
                    [min(peak, x * bandwidth) for x in xs],
                    color=next(colors),
                    line_width=2,
                    legend_label=shown_name(f"{side} {backend} {dtype}"),
                )
    sides = counted[Column.SIDE].tolist() if Column.SIDE in counted else [""] * len(counted)
    roofs = counted[Column.FRACTION_OF_ROOF].astype(float)
    source = ColumnDataSource(
        {
            "x": counted[Column.INTENSITY].tolist(),
            "y": counted[Column.FLOPS_PER_S].tolist(),
            "region": [shown_name(name) for name in counted[Column.REGION_ID]],
            "side": sides,
            "roof": [percent(value if value == value else None) for value in roofs],
            "color": [SIDE_COLORS.get(side, AFTER_COLOR) for side in sides],
        }
    )
    points = plot.scatter("x", "y", source=source, size=9, color="color")
    plot.add_tools(
        HoverTool(
            renderers=[points],
            tooltips=[
                ("region", "@region"),
                ("side", "@side"),
                ("FLOP/B", "@x{0.00}"),
                ("FLOP/s", "@y{0.00a}"),
                ("of roof", "@roof"),
            ],
        )
    )
    if plot.legend:
        plot.legend.location = "bottom_right"
    return plot


TREND_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
TREND_POINTS = "trend-points"
"""The name of the trend's point renderer, whose source's selection is the runs a user clicked."""
TREND_RUN = "run"
"""The field of that renderer's source holding each point's stored run id."""
MAX_COMMIT_TICKS = 30
"""Up to this many runs, each gets its commit under the axis; more would overlap (the hover gives each)."""


def trend_lines(trend: pd.DataFrame) -> figure:
    """Run time and the largest rows over stored runs, oldest left (`aitune.viewer.trends.trend_frame`'s rows):
    a line per row, a point per run and row that a click selects (the renderer named `TREND_POINTS`)."""
    rows = trend[Column.PATH].map(chart_text)  # each point's row, as a chart may name it
    plot = figure(
        height=360,
        sizing_mode="stretch_width",
        title="Run time and the largest rows over stored runs (median of each run)",
        x_axis_label="stored run, oldest first (commit)",
        y_axis_label="ms per run",
        tools=f"{_TOOLS},tap",
        name="history-trend",
    )
    colors = dict(zip(dict.fromkeys(rows), TREND_COLORS * 8, strict=False))
    for row, group in trend.groupby(rows, sort=False):
        times = group[Column.MS].tolist()
        plot.line(group[Column.POSITION].tolist(), times, color=colors[row], line_width=2, legend_label=row)
    source = ColumnDataSource(
        {
            "x": trend[Column.POSITION].tolist(),
            "ms": trend[Column.MS].tolist(),
            TREND_RUN: trend[Column.RUN_ID].tolist(),
            "commit": trend[Column.COMMIT].map(shown_name).tolist(),
            "recorded": trend[Column.RECORDED].tolist(),
            "row": rows.tolist(),
            "color": [colors[row] for row in rows],
        }
    )
    points = plot.scatter("x", "ms", source=source, size=10, color="color", name=TREND_POINTS)
    plot.add_tools(
        HoverTool(
            renderers=[points],
            tooltips=[
                ("run", f"@{TREND_RUN}"),
                ("commit", "@commit"),
                ("recorded", "@recorded"),
                ("row", "@row"),
                ("time", "@ms{0.000} ms"),
            ],
        )
    )
    positions = dict(zip(trend[Column.POSITION], trend[Column.COMMIT], strict=False))
    if len(positions) <= MAX_COMMIT_TICKS:
        plot.xaxis.ticker = sorted(positions)
        plot.xaxis.major_label_overrides = {int(x): chart_text(commit) for x, commit in positions.items()}
        plot.xaxis.major_label_orientation = 0.8
    plot.x_range.range_padding = 0.05  # the first and last runs' points clear of the frame's edges
    plot.legend.click_policy = "hide"
    plot.add_layout(plot.legend[0], "right")  # beside the frame: over it, the legend would take a point's clicks
    return plot
