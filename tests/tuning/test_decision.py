"""A backend wins only beyond noise: the decision rule on synthetic paired timings (no clock involved)."""

from __future__ import annotations

import pytest

from aitune.torch.tuning.decision import FASTER, NOT_FASTER, UNDECIDED, decide, paired_speedup


def test_a_clear_win_is_faster_with_an_interval_above_the_margin():
    eager = [100.0, 102.0, 99.0, 101.0, 100.0, 103.0, 98.0]
    candidate = [50.0, 51.0, 49.0, 50.0, 52.0, 50.0, 49.0]

    decision = decide(eager, candidate, margin=0.05)

    assert decision.verdict == FASTER
    assert decision.interval.low > 1 / 0.95
    assert decision.interval.speedup == pytest.approx(2.0, rel=0.03)


def test_a_clear_loss_is_not_faster():
    eager = [100.0, 101.0, 99.0, 100.0, 102.0, 100.0]
    candidate = [150.0, 149.0, 152.0, 151.0, 150.0, 148.0]

    decision = decide(eager, candidate, margin=0.05)

    assert decision.verdict == NOT_FASTER
    assert decision.interval.high < 1 / 0.95


def test_a_noisy_tie_is_undecided_even_when_the_medians_look_like_a_win():
    # The eager series' coefficient of variation is about 0.5, as in the RNN case that kept a loss:
    # its median alone would call the candidate 1.4× faster.
    eager = [140.0, 60.0, 150.0, 55.0, 145.0, 58.0, 160.0]
    candidate = [100.0, 100.0, 101.0, 99.0, 100.0, 102.0, 98.0]

    decision = decide(eager, candidate, margin=0.05)

    assert decision.verdict == UNDECIDED
    assert decision.interval.low < 1 / 0.95 < decision.interval.high


def test_one_preempted_round_does_not_move_the_interval_ends():
    eager = [100.0] * 10
    candidate = [50.0] * 9 + [5000.0]  # one round lost the CPU (at 95%, ten rounds leave out one extreme each side)

    interval = paired_speedup(eager, candidate)

    assert interval.speedup == pytest.approx(2.0)
    assert (interval.low, interval.high) == pytest.approx((2.0, 2.0))


def test_too_few_rounds_give_no_interval_and_no_win():
    decision = decide([100.0, 100.0, 100.0, 100.0], [10.0, 10.0, 10.0, 10.0], margin=0.05)

    assert (decision.verdict, decision.interval) == (UNDECIDED, None)


def test_the_interval_widens_to_the_extremes_at_the_smallest_round_count():
    interval = paired_speedup([10.0, 20.0, 30.0, 40.0, 50.0, 60.0], [10.0] * 6)

    assert (interval.low, interval.speedup, interval.high, interval.rounds) == (1.0, 3.5, 6.0, 6)
    assert interval.confidence == 0.95 and paired_speedup([10.0] * 5, [10.0] * 5) is None  # 5 rounds: no interval


def test_rounds_with_a_zero_time_are_dropped():
    interval = paired_speedup([0.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0], [50.0] * 7)

    assert interval.rounds == 6
