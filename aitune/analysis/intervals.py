"""Nesting of spans on one thread, found by one sweep over start-sorted intervals.

Spans recorded on one thread are properly nested (a child ends before its parent does), so a
stack is enough: each span's parent is the innermost open span when it starts. Spans are given
column-wise (starts and durations in µs) so callers need not build an object per span.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # events indexes its model with these sweeps, so it cannot be imported here at run time
    from aitune.analysis.events import Span

# Profiler timestamps are rounded to the nanosecond; a child can appear to end a hair after its parent.
_EPSILON_US = 0.002

Columns = tuple[Sequence[float], Sequence[float]]
"""(starts_us, durations_us) of the spans of one thread."""

Interval = tuple[float, float]
"""(start_us, end_us) of one stretch of time."""


def columns(spans: Sequence[Span]) -> Columns:
    """The (starts, durations) columns of a list of spans."""
    return [span.start_us for span in spans], [span.duration_us for span in spans]


def nesting_order(spans: Columns) -> list[int]:
    """Indices of the spans sorted so that every parent comes before its children."""
    starts, durations = spans
    if _ascending(starts, strictly=True):  # traces list a thread's spans by start: no sort (ties need one)
        return list(range(len(starts)))
    keys = list(zip(starts, (-d for d in durations), strict=False))
    return sorted(range(len(starts)), key=keys.__getitem__)


def parents(spans: Columns, order: Sequence[int] | None = None) -> list[int | None]:
    """For each span (all on one thread), the index of the innermost span enclosing it, or None.

    ``order`` is `nesting_order(spans)` when the caller has it already.

    >>> parents(([0.0, 2.0, 20.0], [10.0, 3.0, 1.0]))
    [None, 0, None]
    """
    starts, durations = spans
    ends = [start + duration for start, duration in zip(starts, durations, strict=True)]
    result: list[int | None] = [None] * len(starts)
    stack: list[int] = []
    for index in nesting_order(spans) if order is None else order:
        start = starts[index]
        while stack and ends[stack[-1]] <= start + _EPSILON_US:
            stack.pop()
        if stack and ends[index] <= ends[stack[-1]] + _EPSILON_US:
            result[index] = stack[-1]
        stack.append(index)
    return result


def innermost_enclosing(
    spans: Columns, points_us: Sequence[float], order: Sequence[int] | None = None
) -> list[int | None]:
    """For each time point, the index of the innermost span (all on one thread) containing it, or None.

    ``order`` is `nesting_order(spans)` when the caller has it already.
    """
    if not points_us:
        return []
    starts, durations = spans
    if order is None:
        order = nesting_order(spans)
    ends = [start + duration for start, duration in zip(starts, durations, strict=True)]
    point_order: Sequence[int] = (
        range(len(points_us)) if _ascending(points_us) else sorted(range(len(points_us)), key=points_us.__getitem__)
    )
    result: list[int | None] = [None] * len(points_us)
    stack: list[int] = []
    cursor = 0
    for point_index in point_order:
        point = points_us[point_index]
        while cursor < len(order) and starts[order[cursor]] <= point:
            opening = order[cursor]
            while stack and ends[stack[-1]] <= starts[opening]:
                stack.pop()
            stack.append(opening)
            cursor += 1
        while stack and ends[stack[-1]] < point:
            stack.pop()
        result[point_index] = stack[-1] if stack else None
    return result


def _ascending(values: Sequence[float], strictly: bool = False) -> bool:
    """True when ``values`` never decrease (``strictly``: always increase); in C, ~10× cheaper than a sort by key."""
    ordered = list(values)
    return sorted(ordered) == ordered and (not strictly or len(set(ordered)) == len(ordered))


def merged(intervals: Iterable[Interval]) -> list[Interval]:
    """The union of possibly overlapping intervals as disjoint intervals in time order.

    >>> merged([(5.0, 6.0), (0.0, 4.0), (2.0, 3.0)])
    [(0.0, 4.0), (5.0, 6.0)]
    """
    out: list[Interval] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def intersection(first: Sequence[Interval], second: Sequence[Interval]) -> list[Interval]:
    """The time two lists of disjoint, time-ordered intervals (`merged`) have in common, in the same form.

    >>> intersection([(0.0, 4.0), (5.0, 9.0)], [(3.0, 6.0)])
    [(3.0, 4.0), (5.0, 6.0)]
    """
    out: list[Interval] = []
    i = j = 0
    while i < len(first) and j < len(second):
        start, end = max(first[i][0], second[j][0]), min(first[i][1], second[j][1])
        if start < end:
            out.append((start, end))
        if first[i][1] < second[j][1]:
            i += 1
        else:
            j += 1
    return out


def covered_within(intervals: Sequence[Interval], start: float, end: float) -> float:
    """How much of [start, end] the disjoint, time-ordered ``intervals`` (`merged`) cover; a bisect, then the few
    intervals that reach into the window.

    >>> covered_within([(0.0, 4.0), (5.0, 9.0)], 3.0, 6.0)
    2.0
    """
    index = max(0, bisect_right(intervals, (start, float("inf"))) - 1)
    covered = 0.0
    while index < len(intervals) and intervals[index][0] < end:
        covered += max(0.0, min(end, intervals[index][1]) - max(start, intervals[index][0]))
        index += 1
    return covered


def union_length(intervals: Iterable[Interval]) -> float:
    """Total length covered by possibly overlapping intervals.

    >>> union_length([(0, 4), (2, 6), (10, 11)])
    7.0
    """
    covered, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            covered += end - max(start, reach)
            reach = end
    return covered
