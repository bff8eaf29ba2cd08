"""Nesting of spans on one thread, found by one sweep over start-sorted intervals.

Spans recorded on one thread are properly nested (a child ends before its parent does), so a
stack is enough: each span's parent is the innermost open span when it starts. Spans are given
column-wise (starts and durations in µs) so callers need not build an object per span.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

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

    >>> innermost_enclosing(([0.0, 2.0, 20.0], [10.0, 3.0, 1.0]), [1.0, 2.5, 6.0, 20.5, 30.0])
    [0, 1, 0, 2, None]
    """
    if not points_us:
        return []
    if order is None:
        order = nesting_order(spans)
    if not order:
        return [None] * len(points_us)
    if len(points_us) <= _CELL_LOOKUP_FACTOR * len(order):
        return _sweep(spans, points_us, order)
    return _cell_lookup(spans, points_us, order)


_CELL_LOOKUP_FACTOR = 4
"""Points per span above which `_cell_lookup` is cheaper than one sweep over the points (it sweeps
about four points per span): operators against a capture's runs or regions, 10⁵ points for 10¹–10⁴ spans."""


def _cell_lookup(spans: Columns, points_us: Sequence[float], order: Sequence[int]) -> list[int | None]:
    """`_sweep`'s answers for many points, from its answers for a few.

    The sweep compares a point with span starts (``start <= point``) and ends (``end < point``) only,
    so its answer is the same for every point of one cell: each start or end value itself, and each
    open stretch between two neighbouring ones. One point per cell is swept; every point is then
    answered by a binary search for its cell, in numpy.
    """
    starts, durations = spans
    bounds = np.unique(np.add(starts, durations, dtype=np.float64).tolist() + list(starts))  # sorted
    middles = (bounds[:-1] + bounds[1:]) / 2  # strictly between neighbours, unless they are adjacent floats
    inside = (middles > bounds[:-1]) & (middles < bounds[1:])  # a stretch with no float inside holds no point
    representatives = [bounds[0] - 1.0, *np.ravel(np.column_stack((bounds[:-1], middles))).tolist(), bounds[-1]]
    representatives.append(bounds[-1] + abs(bounds[-1]) + 1.0)
    answers = np.array([-1 if owner is None else owner for owner in _sweep(spans, representatives, order)])
    points = np.asarray(points_us, dtype=np.float64)
    after = np.searchsorted(bounds, points, side="left")  # bounds[after - 1] < point <= bounds[after]
    on_bound = np.zeros(len(points), dtype=bool)
    within = after < len(bounds)
    on_bound[within] = bounds[after[within]] == points[within]
    # representatives: [below all, bound 0, stretch 0, bound 1, stretch 1, ..., bound n-1, above all]
    cells = np.where(on_bound, 2 * after + 1, 2 * after)
    assert bool(inside[after[~on_bound & within & (after > 0)] - 1].all()), "a point fell in an empty stretch"
    owners = answers[cells].tolist()
    return [None if owner < 0 else owner for owner in owners]


def _sweep(spans: Columns, points_us: Sequence[float], order: Sequence[int]) -> list[int | None]:
    """`innermost_enclosing` by one sweep over the points in time order, with a stack of open spans."""
    starts, durations = spans
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
