"""Charts as inline SVG text for the HTML report: pure functions from figures to markup (no torch, no script).

Every label passes through `aitune.report.safe_text` (`shown_name`, then `html_text`): a name from a
profile is drawn as text, never as markup. Charts use presentation attributes and classes only, no
``style`` attribute, so the page's Content-Security-Policy can forbid inline styles other than its own
stylesheet. A chart draws at most `MAX_BARS` rows and says how many it left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aitune.report.formatting import factor
from aitune.report.safe_text import html_text, shown_name

MAX_BARS = 30
"""Most rows one chart draws; the rest are counted in its last line (the tables beside it list more)."""

LABEL_CHARS = 40
"""Longest label drawn beside a bar (cut by `shown_name`, with its hash tag); the tooltip holds 80."""

WIDTH = 760
_LABEL_WIDTH = 300
_VALUE_WIDTH = 150
_ROW = 22
_BAR = 14
_TOP = 8


@dataclass(frozen=True)
class Bar:
    """One row of a bar chart: a label from a document, a value (≥ 0) and the text shown for it."""

    label: str
    value: float
    shown: str


@dataclass(frozen=True)
class Pair:
    """One row of a before/after chart: each side's value (None where that side lacks it) and its text."""

    label: str
    before: float | None
    after: float | None
    shown: str


@dataclass(frozen=True)
class Interval:
    """One row of an interval chart: a ratio with its confidence interval (None where there is none)."""

    label: str
    value: float
    low: float | None
    high: float | None
    shown: str


def bar_chart(title: str, bars: Sequence[Bar]) -> str:
    """Horizontal bars scaled to the largest value; `MAX_BARS` at most."""
    drawn, rows = bars[:MAX_BARS], []
    top = max((bar.value for bar in drawn), default=0.0) or 1.0
    for index, bar in enumerate(drawn):
        y = _TOP + index * _ROW
        rows.append(
            _row(y, bar.label, bar.shown)
            + _rect(_LABEL_WIDTH, y + 3, _plot_width() * max(bar.value, 0.0) / top, _BAR, "bar")
        )
    return _svg(title, rows, len(drawn), len(bars) - len(drawn))


def pair_chart(title: str, pairs: Sequence[Pair]) -> str:
    """Two thin bars per row, before above after, on one scale; `MAX_BARS` rows at most."""
    drawn, rows = pairs[:MAX_BARS], []
    top = max((value or 0.0 for pair in drawn for value in (pair.before, pair.after)), default=0.0) or 1.0
    half = _BAR / 2
    for index, pair in enumerate(drawn):
        y = _TOP + index * _ROW
        widths = [_plot_width() * max(value or 0.0, 0.0) / top for value in (pair.before, pair.after)]
        rows.append(
            _row(y, pair.label, pair.shown)
            + _rect(_LABEL_WIDTH, y + 3, widths[0], half, "before")
            + _rect(_LABEL_WIDTH, y + 3 + half, widths[1], half, "after")
        )
    legend = (
        f'<text x="{_LABEL_WIDTH}" y="{_TOP + len(drawn) * _ROW + 12}" class="legend">'
        '<tspan class="before-text">■ before</tspan> <tspan class="after-text">■ after</tspan></text>'
    )
    return _svg(title, [*rows, legend], len(drawn), len(pairs) - len(drawn), footer=True)


def interval_chart(title: str, intervals: Sequence[Interval], reference: float = 1.0) -> str:
    """A dot per ratio with a whisker for its interval, on a scale that holds every whisker and ``reference``
    (drawn as a vertical line: no change)."""
    drawn, rows = intervals[:MAX_BARS], []
    ends = [value for row in drawn for value in (row.value, row.low, row.high) if value is not None and value > 0]
    low, high = min([reference, *ends]), max([reference, *ends])
    span = (high - low) or 1.0
    low, high = low - span * 0.05, high + span * 0.05

    def x(value: float) -> float:
        return _LABEL_WIDTH + _plot_width() * (value - low) / (high - low)

    for index, row in enumerate(drawn):
        y = _TOP + index * _ROW + 3 + _BAR / 2
        whisker = (
            f'<line x1="{x(row.low):.1f}" x2="{x(row.high):.1f}" y1="{y:.1f}" y2="{y:.1f}" class="whisker"/>'
            if row.low is not None and row.high is not None
            else ""
        )
        rows.append(
            _row(y - 3 - _BAR / 2, row.label, row.shown)
            + whisker
            + f'<circle cx="{x(row.value):.1f}" cy="{y:.1f}" r="4" class="dot"/>'
        )
    bottom = _TOP + len(drawn) * _ROW
    rows.append(
        f'<line x1="{x(reference):.1f}" x2="{x(reference):.1f}" y1="{_TOP}" y2="{bottom}" class="reference"/>'
        f'<text x="{x(reference):.1f}" y="{bottom + 12}" class="axis">{factor(reference)}</text>'
    )
    return _svg(title, rows, len(drawn), len(intervals) - len(drawn), footer=True)


def _plot_width() -> float:
    return WIDTH - _LABEL_WIDTH - _VALUE_WIDTH - 10


def _row(y: float, label: str, shown: str) -> str:
    """A row's label on the left (cut to `LABEL_CHARS`), its value text on the right, and a tooltip."""
    tip, cut = html_text(f"{shown_name(label)}: {shown}"), html_text(shown_name(label, LABEL_CHARS))
    return (
        f"<g><title>{tip}</title>"
        f'<text x="{_LABEL_WIDTH - 6}" y="{y + 15:.1f}" class="label">{cut}</text>'
        f'<text x="{WIDTH - _VALUE_WIDTH + 4}" y="{y + 15:.1f}" class="value">{html_text(shown)}</text></g>'
    )


def _rect(x: float, y: float, width: float, height: float, css_class: str) -> str:
    return f'<rect x="{x}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}" class="{css_class}"/>'


def _svg(title: str, rows: list[str], drawn: int, left_out: int, footer: bool = False) -> str:
    """The chart around ``drawn`` rows (plus a footer line of legend or axis), and the count it ``left_out``."""
    height = _TOP * 2 + (drawn + footer) * _ROW
    if left_out > 0:
        rows.append(f'<text x="{_LABEL_WIDTH}" y="{height + 10}" class="axis">… {left_out} more not drawn</text>')
        height += _ROW
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}"><title>{html_text(title)}</title>{"".join(rows)}</svg>'
    )


SPARK_WIDTH, SPARK_HEIGHT = 160, 24


def sparkline_svg(title: str, values: Sequence[float | None]) -> str:
    """A small line of ``values`` scaled between their smallest and largest (a gap where one is None), for a
    table cell; its title (the tooltip) is ``title``."""
    present = [value for value in values if value is not None]
    low, high = (min(present), max(present)) if present else (0.0, 0.0)
    step = SPARK_WIDTH / max(len(values) - 1, 1)
    segments: list[list[str]] = [[]]
    for index, value in enumerate(values):
        if value is None:
            segments.append([])
            continue
        y = SPARK_HEIGHT - 2 - (SPARK_HEIGHT - 4) * ((value - low) / (high - low) if high > low else 0.5)
        segments[-1].append(f"{index * step:.1f},{y:.1f}")
    lines = "".join(
        f'<polyline points="{" ".join(points)}" class="spark" fill="none"/>' for points in segments if points
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="sparkline" role="img" width="{SPARK_WIDTH}" '
        f'height="{SPARK_HEIGHT}" viewBox="0 0 {SPARK_WIDTH} {SPARK_HEIGHT}"><title>{html_text(title)}</title>'
        f"{lines}</svg>"
    )
