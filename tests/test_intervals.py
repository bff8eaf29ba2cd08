"""Many points against few spans are answered by cell lookup; its answers are the sweep's, exactly,
on nested, overlapping, touching, tied and zero-length spans and on points at every start and end."""

import random

import pytest

from aitune.analysis.intervals import _cell_lookup, _sweep, innermost_enclosing, nesting_order


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

    assert _cell_lookup(spans, points, order) == _sweep(spans, points, order)


def test_points_in_a_trace_of_real_magnitude_find_their_run():
    origin = 1.7e15  # µs since the epoch, where a float's spacing is a quarter µs
    runs = ([origin, origin + 100.0], [100.0, 100.0])
    points = [origin - 1, origin, origin + 50.25, origin + 100.0, origin + 200.0, origin + 200.25] * 10

    assert innermost_enclosing(runs, points) == [None, 0, 0, 1, 1, None] * 10


def test_points_against_no_span_are_enclosed_by_none():
    assert innermost_enclosing(([], []), [1.0, 2.0]) == [None, None]
