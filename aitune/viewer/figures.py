"""Bokeh figures as plain functions of the store's tables: no state, no I/O, text drawn as text.

Bokeh draws factors, legends and titles on the canvas and escapes a tooltip's ``@field`` values (none
here is ``{safe}``, and every tooltip is a list of fields, never an HTML template), so region names from
a stranger's profile cannot inject markup here; they are drawn as `shown_name` gives them (bidi and
zero-width characters spelled out, a long name cut), so none reverses or crowds out the figures beside
it. A title or axis label is typeset as mathematics between ``$$``: a name placed there passes `chart_text`.
"""

from __future__ import annotations

import pandas as pd
from bokeh.models import ColumnDataSource, FactorRange, HoverTool
from bokeh.plotting import figure

from aitune.report.formatting import percent
from aitune.report.safe_text import chart_text, shown_name
from aitune.viewer.tables import RESIDUAL

SIDE_COLORS = {"before": "#8c8c8c", "after": "#1f77b4"}
KIND_HATCH = {"managed": "/", "untuned": " ", "residual": "."}
MAX_BARS = 40
"""Regions drawn in the bar chart (largest first); the tables below the chart list all of them."""

_TOOLS = "pan,wheel_zoom,box_zoom,reset,save"


MEASURES = {
    "time": ("ms", "Time per region in a run ({domain}, median over runs)", "ms of {domain} time per run"),
    "share": ("percent", "Share of {domain} time per region (median over runs)", "% of run {domain} time"),
}
"""What the region bars measure: (column drawn, title, axis label)."""


def top_paths(regions: pd.DataFrame, limit: int = MAX_BARS, column: str = "fraction") -> list[str]:
    """The ``limit`` region paths with the largest ``column`` on either side, residual always included."""
    largest = regions[regions["path"] != RESIDUAL].groupby("path", sort=False)[column].max()
    return [*largest.sort_values(ascending=False).index[:limit], RESIDUAL]


def region_bars(regions: pd.DataFrame, domain: str, measure: str = "share") -> figure:
    """Grouped horizontal bars: per region path one bar per side; managed regions hatched, residual dotted.

    ``measure`` is ``share`` (% of the run) or ``time`` (ms per run, what a before/after pair needs:
    a region that got faster can take a larger share of a shorter run); the tooltip gives both.
    """
    drawn, title, axis = MEASURES[measure]
    paths = top_paths(regions, column="time_us" if measure == "time" else "fraction")
    shown = regions[regions["path"].isin(paths)].assign(path=lambda frame: frame["path"].map(shown_name))
    paths = [shown_name(path) for path in paths]
    sides = list(dict.fromkeys(shown["side"]))
    factors = [(path, side) for path in reversed(paths) for side in sides]
    source = ColumnDataSource(
        {
            "y": [(path, side) for path, side in zip(shown["path"], shown["side"], strict=True)],
            "percent": (shown["fraction"] * 100).tolist(),
            "ms": (shown["time_us"] / 1000).tolist(),
            "path": shown["path"].tolist(),
            "side": shown["side"].tolist(),
            "kind": shown["kind"].tolist(),
            "color": [SIDE_COLORS[side] for side in shown["side"]],
            "hatch": [KIND_HATCH[kind] for kind in shown["kind"]],
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
    column = f"{metric}_time_us"
    plot = figure(
        height=280,
        sizing_mode="stretch_width",
        title=f"{metric} time per measured run",
        x_axis_label="run index",
        y_axis_label="ms",
        tools=_TOOLS,
        name="run-points",
    )
    for side, group in runs.groupby("side", sort=False):
        source = ColumnDataSource(
            {
                "run": group["run_index"].tolist(),
                "ms": (group[column] / 1000).tolist(),
                "outlier": group["outlier"].map(_yes_no).tolist(),
            }
        )
        plot.scatter("run", "ms", source=source, size=9, color=SIDE_COLORS[str(side)], legend_label=str(side))
    marked = runs[runs["outlier"]]
    if not marked.empty:
        plot.scatter(
            marked["run_index"],
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
    """One lane per region, one bar per call, in ms from the start of the run."""
    spans = spans.assign(lane=spans["lane"].map(shown_name)) if len(spans) else spans
    lanes = list(dict.fromkeys(spans["lane"]))
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
    plot.hbar(y="lane", left="start_ms", right="end_ms", height=0.7, source=source, color=SIDE_COLORS["after"])
    plot.add_tools(
        HoverTool(
            tooltips=[("region", "@lane"), ("start", "@start_ms{0.00} ms"), ("duration", "@duration_ms{0.00} ms")]
        )
    )
    return plot


SLOWEST_COLOR = "#d62728"


def rank_bars(ranks: pd.DataFrame, quantity: str) -> figure:
    """One bar per rank and side: the median (ms) of ``quantity`` (the run time or a region) on that rank,
    the slowest rank of each side in red (`aitune.viewer.tables.rank_region_table`'s rows)."""
    shown = ranks[ranks["region_id"] == quantity]
    sides = list(dict.fromkeys(shown["side"]))
    factors = [(f"rank {rank}", side) for rank in dict.fromkeys(shown["rank"]) for side in sides]
    slowest = shown["rank"] == shown["slowest_rank"]
    source = ColumnDataSource(
        {
            "x": [(f"rank {rank}", side) for rank, side in zip(shown["rank"], shown["side"], strict=True)],
            "ms": (shown["median_us"] / 1000).tolist(),
            "side": shown["side"].tolist(),
            "slowest": slowest.map(_yes_no).tolist(),
            "color": [
                SLOWEST_COLOR if flag else SIDE_COLORS[side] for flag, side in zip(slowest, shown["side"], strict=True)
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


def roofline(regions: pd.DataFrame, peaks: dict[str, dict[str, dict]]) -> figure:
    """Regions on a log-log roofline: arithmetic intensity (FLOP/byte) across, achieved FLOP/s up; the
    roofs of each side's machine (per backend and dtype, ``min(peak, intensity × bandwidth)``) as lines.

    Regions without counted work are left out (the table beside lists them with their uncounted time).
    """
    counted = regions[(regions["flops"] > 0) & (regions["counted_us"] > 0)]
    low = float(min(counted["intensity"].min(), 0.1)) if not counted.empty else 0.1
    high = float(max(counted["intensity"].max(), 1000.0)) if not counted.empty else 1000.0
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
            bandwidth = roof.get("copy_bytes_per_s", 0.0)
            for dtype, peak in roof.get("gemm_flops_per_s", {}).items():
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
    source = ColumnDataSource(
        {
            "x": counted["intensity"].tolist(),
            "y": counted["flops_per_s"].tolist(),
            "region": [shown_name(name) for name in counted["region_id"]],
            "side": counted["side"].tolist() if "side" in counted else [""] * len(counted),
            "roof": [percent(value if value == value else None) for value in counted["fraction_of_roof"].astype(float)],
            "color": [SIDE_COLORS.get(side, "#1f77b4") for side in counted.get("side", ["after"] * len(counted))],
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
MAX_COMMIT_TICKS = 30
"""Up to this many runs, each gets its commit under the axis; more would overlap (the hover gives each)."""


def trend_lines(trend: pd.DataFrame) -> figure:
    """Run time and the largest rows over stored runs, oldest left (`aitune.viewer.trends.trend_frame`'s rows):
    a line per row, a point per run and row that a click selects (the renderer named `TREND_POINTS`)."""
    shown = trend.assign(row=trend["path"].map(chart_text))
    plot = figure(
        height=360,
        sizing_mode="stretch_width",
        title="Run time and the largest rows over stored runs (median of each run)",
        x_axis_label="stored run, oldest first (commit)",
        y_axis_label="ms per run",
        tools=f"{_TOOLS},tap",
        name="history-trend",
    )
    colors = dict(zip(dict.fromkeys(shown["row"]), TREND_COLORS * 8, strict=False))
    for row, group in shown.groupby("row", sort=False):
        plot.line(group["position"].tolist(), group["ms"].tolist(), color=colors[row], line_width=2, legend_label=row)
    source = ColumnDataSource(
        {
            "x": shown["position"].tolist(),
            "ms": shown["ms"].tolist(),
            "run": shown["run_id"].tolist(),
            "commit": shown["commit"].map(shown_name).tolist(),
            "recorded": shown["recorded"].tolist(),
            "row": shown["row"].tolist(),
            "color": [colors[row] for row in shown["row"]],
        }
    )
    points = plot.scatter("x", "ms", source=source, size=10, color="color", name=TREND_POINTS)
    plot.add_tools(
        HoverTool(
            renderers=[points],
            tooltips=[
                ("run", "@run"),
                ("commit", "@commit"),
                ("recorded", "@recorded"),
                ("row", "@row"),
                ("time", "@ms{0.000} ms"),
            ],
        )
    )
    positions = dict(zip(shown["position"], shown["commit"], strict=False))
    if len(positions) <= MAX_COMMIT_TICKS:
        plot.xaxis.ticker = sorted(positions)
        plot.xaxis.major_label_overrides = {int(x): chart_text(commit) for x, commit in positions.items()}
        plot.xaxis.major_label_orientation = 0.8
    plot.x_range.range_padding = 0.05  # the first and last runs' points clear of the frame's edges
    plot.legend.click_policy = "hide"
    plot.add_layout(plot.legend[0], "right")  # beside the frame: over it, the legend would take a point's clicks
    return plot
