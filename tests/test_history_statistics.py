"""The history's statistics as specifications: the rank test, step detection on synthetic series, the
ledger's figures on a hand-made set, and the sparkline."""

from __future__ import annotations

import math
import random

import pytest

from aitune.history.check import judge, mann_whitney_greater, regressions
from aitune.history.ledger import Prediction, kendall_tau, ledger
from aitune.history.record import RUN_TIME, RunRecord, Series
from aitune.history.steps import steps
from aitune.history.trend import sparkline


def record(**rows: list[float]) -> RunRecord:
    """A run whose rows have these samples (µs); the run time is their sum per measured run."""
    run = [sum(values) for values in zip(*rows.values(), strict=True)]
    series = [Series(RUN_TIME, RUN_TIME, "run", tuple(run))]
    series += [Series(path, f"untuned_module:{path}", "region", tuple(values)) for path, values in rows.items()]
    return RunRecord("", "w", "w", "m", {}, "cpu", tuple(series))


def noisy(center: float, count: int, rng: random.Random, spread: float = 0.02) -> list[float]:
    return [center * (1 + rng.uniform(-spread, spread)) for _ in range(count)]


def test_the_rank_test_is_small_when_every_new_sample_is_larger_and_large_when_they_mix():
    low, high = [1.0, 2, 3, 4, 5, 6, 7, 8], [11.0, 12, 13, 14, 15, 16, 17, 18]

    assert mann_whitney_greater(high, low) < 0.002
    assert mann_whitney_greater(low, high) > 0.99
    assert 0.3 < mann_whitney_greater([1.0, 4, 5, 8], [2.0, 3, 6, 7]) < 0.7
    assert mann_whitney_greater([], low) == 1.0
    assert mann_whitney_greater([3.0, 3.0], [3.0, 3.0]) == 1.0  # all tied: no evidence


def test_a_region_slowed_beyond_the_threshold_is_the_one_named():
    rng = random.Random(1)
    baseline = [record(encoder=noisy(100, 5, rng), denoiser=noisy(300, 5, rng)) for _ in range(20)]
    new = record(encoder=noisy(100, 5, rng), denoiser=noisy(390, 5, rng))

    found = regressions(judge(new, baseline, threshold=0.10))

    assert [verdict.path for verdict in found] == [RUN_TIME, "denoiser"]
    assert found[1].ratio == pytest.approx(1.3, rel=0.03)


def test_a_slowdown_within_the_threshold_or_within_noise_is_no_regression():
    rng = random.Random(2)
    baseline = [record(encoder=noisy(100, 5, rng)) for _ in range(20)]

    within_threshold = judge(record(encoder=noisy(105, 5, rng)), baseline, threshold=0.10)
    one_slow_sample = judge(record(encoder=[100.0, 100, 100, 100, 500]), baseline, threshold=0.10)

    assert regressions(within_threshold) == []
    assert regressions(one_slow_sample) == []  # the median did not move


def test_a_run_stretched_by_a_loaded_machine_keeps_its_fastest_sample_and_is_no_regression():
    unloaded = [100.0, 101, 99, 100, 140, 100, 102, 98, 100, 100]  # one preempted sample in ten
    baseline = [record(encoder=unloaded) for _ in range(20)]
    preempted = record(encoder=[140.0, 141, 139, 140, 142, 100, 140])  # all but one run stretched
    moved = record(encoder=[140.0, 141, 139, 140, 142, 138, 140])  # the code itself got slower

    stretched = next(v for v in judge(preempted, baseline) if v.path == "encoder")
    slower = next(v for v in judge(moved, baseline) if v.path == "encoder")

    assert (stretched.ratio, stretched.p_value < 0.002, stretched.fast_ratio) == (
        pytest.approx(1.4),
        True,
        pytest.approx(1.0, abs=0.03),
    )
    assert not stretched.regressed
    assert slower.regressed


def test_a_run_within_the_range_the_stored_captures_spanned_is_no_regression():
    rng = random.Random(3)
    quiet = [record(encoder=noisy(100, 7, rng)) for _ in range(17)]
    loaded = [record(encoder=noisy(140, 7, rng)) for _ in range(3)]  # captures on a busier day: whole runs slower
    within = record(encoder=noisy(130, 7, rng))
    beyond = record(encoder=noisy(160, 7, rng))

    inside = next(v for v in judge(within, quiet + loaded) if v.path == "encoder")
    outside = next(v for v in judge(beyond, quiet + loaded) if v.path == "encoder")

    assert (inside.ratio > 1.25, inside.fast_ratio > 1.2, inside.p_value < 0.002) == (True, True, True)
    assert inside.spread_us == pytest.approx(140, rel=0.03)
    assert not inside.regressed
    assert outside.regressed


def test_a_tiny_region_does_not_fail_the_gate_by_jitter_alone():
    baseline = [record(big=[1000.0] * 5, tiny=[1.0, 1.01, 0.99, 1.0, 1.0]) for _ in range(20)]
    new = record(big=[1000.0] * 5, tiny=[2.0] * 5)  # doubled, but 0.1% of the run

    verdicts = judge(new, baseline, threshold=0.10)

    assert regressions(verdicts) == []
    assert next(v for v in verdicts if v.path == "tiny").ratio == pytest.approx(2.0)


def test_a_row_the_baseline_never_had_is_new_not_regressed():
    new = record(encoder=[100.0] * 3, added=[50.0] * 3)

    verdict = next(v for v in judge(new, [record(encoder=[100.0] * 3)]) if v.path == "added")

    assert (verdict.baseline_us, verdict.regressed) == (None, False)


@pytest.mark.parametrize("seed", range(5))
def test_one_step_in_a_noisy_series_is_found_where_it_is(seed):
    rng = random.Random(seed)
    series = noisy(100, 25, rng) + noisy(130, 25, rng)

    found = steps(series)

    assert [step.index for step in found] == [25]
    assert found[0].ratio == pytest.approx(1.3, rel=0.03)


def test_two_steps_are_both_found_and_a_flat_series_has_none():
    rng = random.Random(7)
    two = noisy(100, 20, rng) + noisy(150, 20, rng) + noisy(90, 20, rng)

    assert [step.index for step in steps(two)] == [20, 40]
    assert steps(noisy(100, 60, rng)) == []
    assert steps([5.0] * 10) == []
    assert steps([1.0, 2.0]) == []  # too short to tell a step from noise


def test_the_ledger_of_a_hand_made_set():
    made = [
        Prediction("onnxruntime", "cpu", "unet", predicted=2.0, verified=1.0),
        Prediction("onnxruntime", "cpu", "vae", predicted=1.5, verified=1.5),
        Prediction("onnxruntime", "cpu", "text", predicted=1.2, verified=1.3),
        Prediction("onnxruntime", "cpu", "lost", predicted=1.1, verified=None),  # not verified: not counted
        Prediction("inductor", "NVIDIA H100", "unet", predicted=1.4, verified=1.4),
    ]

    rows = ledger(made)

    inductor, ort = rows
    logs = [math.log(2.0), 0.0, math.log(1.2 / 1.3)]
    mean = sum(logs) / 3
    assert (ort.backend, ort.device, ort.count) == ("onnxruntime", "cpu", 3)
    assert ort.bias == pytest.approx(math.exp(mean))
    assert ort.spread == pytest.approx(math.exp(math.sqrt(sum((x - mean) ** 2 for x in logs) / 2)))
    # predicted 2.0 > 1.5 > 1.2 against verified 1.0 < 1.5 > 1.3: one pair agrees, two disagree
    assert ort.kendall_tau == pytest.approx(-1 / 3)
    assert (inductor.count, inductor.bias, inductor.spread, inductor.kendall_tau) == (1, 1.0, None, None)


def test_kendall_tau_b_counts_ties_on_one_side():
    assert kendall_tau([1, 2, 3], [1, 1, 2]) == pytest.approx(2 / math.sqrt(3 * 2))
    assert kendall_tau([1, 1], [1, 2]) is None


def test_a_sparkline_spans_its_range_and_leaves_gaps():
    assert sparkline([10, 20, 30]) == "▁▅█"
    assert sparkline([5, None, 5]) == "▁ ▁"
    assert sparkline([None]) == " "
