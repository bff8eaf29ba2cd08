"""Many points against few spans are answered by cell lookup; its answers are the sweep's, exactly,
on nested, overlapping, touching, tied and zero-length spans and on points at every start and end."""

import random

import numpy as np
import pytest

from aitune.analysis.intervals import (
    _cell_lookup,
    _nested_parents,
    _parents_by_stack,
    _sweep,
    innermost_enclosing,
    nesting_order,
    order_array,
    parent_array,
)


def random_spans(rng: random.Random, count: int) -> tuple[list[float], list[float]]:
    """Spans on a coarse grid (so starts, ends and points often coincide), some nested, some overlapping."""
    starts, durations = [], []
    for _ in range(count):
        start = rng.randrange(0, 200) / 4
        starts.append(start)
        durations.append(rng.choice([0.0, 0.25, rng.randrange(1, 80) / 4]))
    return starts, durations


def points_for(rng: random.Random, spans: tuple[list[float], list[float]], count: int) -> list[float]:
    bounds = spans[0] + [start + duration for start, duration in zip(*spans, strict=True)]
    points = [rng.choice(bounds) if rng.random() < 0.5 else rng.uniform(-5, 80) for _ in range(count)]
    return sorted(points) if rng.random() < 0.5 else points


@pytest.mark.parametrize("seed", range(40))
def test_cell_lookup_answers_every_point_as_the_sweep_does(seed):
    rng = random.Random(seed)
    spans = random_spans(rng, rng.randrange(1, 30))
    points = points_for(rng, spans, 400)
    order = nesting_order(spans)

    assert [None if owner < 0 else owner for owner in _cell_lookup(spans, points, order).tolist()] == _sweep(
        spans, points, order
    )


def test_points_in_a_trace_of_real_magnitude_find_their_run():
    origin = 1.7e15  # µs since the epoch, where a float's spacing is a quarter µs
    runs = ([origin, origin + 100.0], [100.0, 100.0])
    points = [origin - 1, origin, origin + 50.25, origin + 100.0, origin + 200.0, origin + 200.25] * 10

    assert innermost_enclosing(runs, points) == [None, 0, 0, 1, 1, None] * 10


def test_points_against_no_span_are_enclosed_by_none():
    assert innermost_enclosing(([], []), [1.0, 2.0]) == [None, None]


def nested_spans(rng: random.Random, count: int) -> tuple[list[float], list[float]]:
    """Properly nested spans, as one thread records them: children, siblings, ties, zero lengths, ends that
    touch their parent's, and, on a coarse grid, ends within the rounding tolerance of a sibling's start."""
    starts: list[float] = []
    durations: list[float] = []

    def fill(start: float, end: float, depth: int) -> None:
        cursor = start
        while len(starts) < count and cursor < end and rng.random() < 0.8:
            child_start = cursor + rng.choice([0.0, 0.001, 0.25, 1.0])
            child_end = min(end, child_start + rng.choice([0.0, 0.25, rng.randrange(1, 40) / 4]))
            if child_start > end:
                return
            starts.append(child_start)
            durations.append(child_end - child_start)
            if depth < 6:
                fill(child_start, child_end, depth + 1)
            cursor = child_end + rng.choice([0.0, 0.001, 0.5])

    while len(starts) < count:
        fill(len(starts) * 100.0, len(starts) * 100.0 + 90.0, 0)
    return starts, durations


@pytest.mark.parametrize("seed", range(60))
def test_parents_found_in_numpy_are_the_sweeps_on_nested_and_on_overlapping_spans(seed):
    rng = random.Random(seed)
    spans = nested_spans(rng, rng.randrange(1, 300)) if seed % 2 else random_spans(rng, rng.randrange(1, 60))
    order = order_array(*spans)
    sorted_starts = np.asarray(spans[0])[order]
    sorted_ends = sorted_starts + np.asarray(spans[1])[order]
    expected = np.full(len(order), -1)
    by_stack = _parents_by_stack(sorted_starts.tolist(), sorted_ends.tolist())
    expected[order] = np.where(by_stack >= 0, order[np.maximum(by_stack, 0)], -1)

    assert parent_array(*spans).tolist() == expected.tolist()


def test_nested_spans_take_the_numpy_path_and_overlapping_ones_the_sweep():
    nested = ([0.0, 1.0, 2.0, 5.0, 20.0], [10.0, 3.0, 1.0, 0.0, 1.0])
    overlapping = ([0.0, 5.0], [10.0, 10.0])

    assert _nested_parents(np.array(nested[0]), np.add(*nested)).tolist() == [-1, 0, 1, 0, -1]
    assert _nested_parents(np.array(overlapping[0]), np.add(*overlapping)) is None
    assert parent_array(*overlapping).tolist() == [-1, -1]
