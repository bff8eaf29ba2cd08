"""Nesting of spans on one thread, found by one sweep over start-sorted intervals.

Spans recorded on one thread are properly nested (a child ends before its parent does), so a
stack is enough: each span's parent is the innermost open span when it starts.
"""

from __future__ import annotations

from collections.abc import Sequence

from aitune.analysis.events import Span

# Profiler timestamps are rounded to the nanosecond; a child can appear to end a hair after its parent.
_EPSILON_US = 0.002


def nesting_order(spans: Sequence[Span]) -> list[int]:
    """Indices of ``spans`` sorted so that every parent comes before its children."""
    return sorted(range(len(spans)), key=lambda i: (spans[i].start_us, -spans[i].end_us))


def parents(spans: Sequence[Span]) -> list[int | None]:
    """For each span (all on one thread), the index of the innermost span enclosing it, or None.

    >>> a, b = Span("a", 0, 10, (1, 1)), Span("b", 2, 3, (1, 1))
    >>> parents([a, b])
    [None, 0]
    """
    result: list[int | None] = [None] * len(spans)
    stack: list[int] = []
    for index in nesting_order(spans):
        span = spans[index]
        while stack and spans[stack[-1]].end_us <= span.start_us + _EPSILON_US:
            stack.pop()
        if stack and span.end_us <= spans[stack[-1]].end_us + _EPSILON_US:
            result[index] = stack[-1]
        stack.append(index)
    return result


def innermost_enclosing(spans: Sequence[Span], points_us: Sequence[float]) -> list[int | None]:
    """For each time point, the index of the innermost span (all on one thread) containing it, or None."""
    order = nesting_order(spans)
    point_order = sorted(range(len(points_us)), key=points_us.__getitem__)
    result: list[int | None] = [None] * len(points_us)
    stack: list[int] = []
    cursor = 0
    for point_index in point_order:
        point = points_us[point_index]
        while cursor < len(order) and spans[order[cursor]].start_us <= point:
            while stack and spans[stack[-1]].end_us <= spans[order[cursor]].start_us:
                stack.pop()
            stack.append(order[cursor])
            cursor += 1
        while stack and spans[stack[-1]].end_us < point:
            stack.pop()
        result[point_index] = stack[-1] if stack else None
    return result
