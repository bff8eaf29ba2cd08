"""End-to-end verification on synthetic timings (`aitune.compare.verification`), untuned slowdowns and their report.

A synthetic run takes ``run_us`` plus the effect of each tuned region plus a repeating jitter, so
every verdict here is exact; the torch adapter is tested in `tests/test_loop.py`.
"""

import dataclasses
import itertools
import json

import pytest
from documents import profile

from aitune.analysis.statistics import median_rank, paired_speedup_figure
from aitune.compare import compare_profiles
from aitune.compare.gains import region_gains, slowdown_line, untuned_slowdowns
from aitune.compare.loop_report import read_loop_report
from aitune.compare.verification import (
    CONTRIBUTION,
    END_TO_END,
    OUTRUN,
    PairedSpeedup,
    RegionCheck,
    VerifyConfig,
    paired_speedup,
    verify_regions,
)
from aitune.errors import ProfileError

JITTER = [0.0, 3.0, -2.0, 1.0, -3.0, 2.0, -1.0]  # µs, repeating: noise around 100 µs runs


class Synthetic:
    """``measure(enabled)``: 100 µs plus each enabled region's effect (µs) plus the next jitter; logs every call."""

    def __init__(self, effects, jitter=JITTER, drift_us=0.0):
        self.effects, self.jitter, self.drift_us = effects, itertools.cycle(jitter), drift_us
        self.calls = []

    def __call__(self, enabled):
        self.calls.append(enabled)
        drift = self.drift_us * len(self.calls)
        return [100.0 + sum(self.effects[path] for path in enabled) + next(self.jitter) + drift]


def test_a_region_that_slows_the_run_is_put_back_with_its_end_to_end_figures():
    verification = verify_regions(["encoder"], Synthetic({"encoder": 30.0}))

    (check,) = verification.checks
    assert (check.path, check.kept, check.compared) == ("encoder", False, END_TO_END)
    assert check.speedup.median == pytest.approx(100 / 130, rel=0.05)
    assert check.speedup.ci_high < 1
    assert verification.kept == [] and verification.put_back == ["encoder"]


def test_a_region_that_speeds_the_run_up_beyond_noise_is_kept():
    verification = verify_regions(["encoder"], Synthetic({"encoder": -30.0}))

    (check,) = verification.checks
    assert check.kept and check.compared == END_TO_END
    assert check.speedup.ci_low > 1.3
    assert verification.end_to_end == check.speedup


def test_of_a_win_and_a_loss_the_loss_is_put_back_on_its_contribution_and_the_win_kept():
    verification = verify_regions(["decoder", "encoder"], Synthetic({"encoder": -30.0, "decoder": 20.0}))

    checks = {check.path: check for check in verification.checks}
    assert (checks["decoder"].kept, checks["decoder"].compared) == (False, CONTRIBUTION)
    assert checks["decoder"].speedup.median < 1
    assert (checks["encoder"].kept, checks["encoder"].compared) == (True, END_TO_END)
    assert verification.kept == ["encoder"]
    assert verification.end_to_end.median == pytest.approx(100 / 70, rel=0.05)


def test_a_region_whose_removal_does_not_slow_the_run_is_dropped_though_the_set_wins():
    verification = verify_regions(["head", "encoder"], Synthetic({"encoder": -30.0, "head": 0.0}))

    assert [(check.path, check.kept) for check in verification.checks] == [("head", False), ("encoder", True)]


def test_two_wins_are_both_kept_each_on_its_contribution():
    verification = verify_regions(["a", "b"], Synthetic({"a": -20.0, "b": -30.0}))

    checks = {check.path: check for check in verification.checks}
    assert checks["a"].kept and checks["a"].compared == CONTRIBUTION
    assert checks["b"].kept and checks["b"].compared == CONTRIBUTION
    assert verification.end_to_end.median == pytest.approx(100 / 50, rel=0.05)


def test_when_nothing_changes_nothing_is_kept():
    verification = verify_regions(["encoder"], Synthetic({"encoder": 0.0}))

    (check,) = verification.checks
    assert not check.kept and check.speedup.ci_low <= 1 <= check.speedup.ci_high


def test_drift_during_the_check_does_not_make_a_win():
    # The machine slows by 1 µs a run: timing eager first and tuned second in every round would call it a loss,
    # the other way round a win; alternating the order cancels it.
    measure = Synthetic({"encoder": 0.0}, jitter=[0.0], drift_us=1.0)

    verification = verify_regions(["encoder"], measure, VerifyConfig(min_rounds=10, max_rounds=10))

    assert not verification.checks[0].kept
    assert verification.checks[0].speedup.median == pytest.approx(1.0, abs=0.01)


def test_rounds_alternate_the_order_of_the_two_sides_after_one_warm_run_each():
    measure = Synthetic({"encoder": -30.0})

    verify_regions(["encoder"], measure, VerifyConfig(min_rounds=3, max_rounds=3))

    eager, tuned = frozenset(), frozenset({"encoder"})
    assert measure.calls == [eager, tuned, eager, tuned, tuned, eager, eager, tuned]


def test_a_comparison_that_never_settles_stops_at_max_rounds():
    measure = Synthetic({"encoder": -1.0}, jitter=[0.0, 20.0, -20.0])  # a 1% effect in 20% noise

    verification = verify_regions(["encoder"], measure, VerifyConfig(min_rounds=4, max_rounds=9))

    assert verification.checks[0].speedup.rounds == 9
    assert len(measure.calls) == 2 + 2 * 9


def test_a_passed_deadline_stops_at_min_rounds_and_skips_the_contribution_checks():
    measure = Synthetic({"a": -30.0, "b": 0.0}, jitter=[0.0, 20.0, -20.0])

    verification = verify_regions(["a", "b"], measure, VerifyConfig(min_rounds=4, max_rounds=50), 0.0, lambda: 1.0)

    assert [check.compared for check in verification.checks] == [END_TO_END, END_TO_END]
    assert verification.end_to_end.rounds == 4


def test_the_interval_of_the_median_uses_order_statistics():
    assert median_rank(20) == 6  # the textbook 95% ranks for n = 20: the 6th smallest and the 6th largest
    few = paired_speedup_figure([5.0, 1.0, 3.0], [1.0, 1.0, 1.0])
    assert (few.low, few.high, few.at_confidence) == (1.0, 5.0, False)  # too few rounds: the whole range

    speedup = paired_speedup([10.0, 12.0, 11.0, 10.0, 10.0, 13.0], [5.0, 6.0, 5.5, 5.0, 4.0, 6.5])

    assert speedup == PairedSpeedup(rounds=6, median=2.0, ci_low=2.0, ci_high=2.5)


def test_untuned_regions_slower_after_tuning_are_named_with_their_factor():
    before = profile(
        [{"untuned_module:encoder": 100.0, "untuned_module:decoder": 50.0, "untuned_module:head": 20.0}] * 3
    )
    after = profile([{"aot_module:encoder": 40.0, "untuned_module:decoder": 80.0, "untuned_module:head": 20.5}] * 3)

    slowed = untuned_slowdowns(compare_profiles(before, after), ["encoder"])

    assert [(s.path, s.factor) for s in slowed] == [("decoder", pytest.approx(1.6))]
    assert "untuned regions ran slower after tuning: decoder 1.60× [1.60, 1.60]" in slowdown_line(slowed)
    assert slowdown_line([]) is None


def test_a_region_holding_a_tuned_one_is_not_called_slower():
    before = profile([{"untuned_module:model": 100.0, "untuned_module:model.encoder": 50.0}] * 3)
    after = profile([{"untuned_module:model": 130.0, "aot_module:model.encoder": 80.0}] * 3)

    assert untuned_slowdowns(compare_profiles(before, after), ["model.encoder"]) == []


def test_the_verification_of_each_region_reads_back_from_the_compare_report():
    before = profile([{"untuned_module:encoder": 100.0}] * 3)
    after = profile([{"untuned_module:encoder": 101.0}] * 3)
    check = RegionCheck("encoder", False, END_TO_END, PairedSpeedup(12, 0.73, 0.63, 0.92))
    gains = region_gains(
        {}, compare_profiles(before, after), {"encoder": ("onnxruntime", None)}, None, {"encoder": check}
    )
    report = {**compare_profiles(before, after).to_dict(), "speedup": {"value": 1.0, "ci_low": None, "ci_high": None}}
    report["tuned_regions"] = [gain.to_dict() for gain in gains]

    (gain,) = read_loop_report(json.loads(json.dumps(report)), "compare.json").regions

    assert gain == gains[0] and gain.check == check
    assert not gain.tuned and gain.realised_shown == (None, None)
    assert gain.note == "put back: end to end 0.73× [0.63, 0.92] over 12 rounds"
    assert check.line(gain.winner) == "encoder: onnxruntime put back: end to end 0.73× [0.63, 0.92] over 12 rounds"


def test_one_figure_outruns_another_only_when_their_intervals_do_not_overlap():
    recipe = PairedSpeedup(9, 1.11, 1.05, 1.17)

    assert PairedSpeedup(9, 1.25, 1.18, 1.31).outruns(recipe)
    assert not PairedSpeedup(9, 1.25, 1.15, 1.31).outruns(recipe)  # a higher median within the noise of both
    assert not recipe.outruns(PairedSpeedup(9, 1.25, 1.15, 1.31))


def test_a_region_outrun_by_the_other_candidate_shows_its_own_figure_labelled_as_its_own():
    check = RegionCheck("", False, OUTRUN, PairedSpeedup(9, 1.11, 1.05, 1.17))

    assert check.line("inductor") == (
        "(whole model): inductor put back: outrun by the other candidate, which ran faster end to end"
        " (this one 1.11× [1.05, 1.17] over 9 rounds)"
    )


def test_a_compare_report_with_a_malformed_check_is_refused_with_the_field():
    report = {
        **compare_profiles(profile([{"untuned_module:a": 1.0}] * 2), profile([{"untuned_module:a": 1.0}] * 2)).to_dict()
    }
    report["speedup"] = {"value": 1.0, "ci_low": None, "ci_high": None}
    report["tuned_regions"] = [{"path": "a", "winner": "onnxruntime", "check": {"path": "a", "kept": "yes"}}]

    with pytest.raises(ProfileError, match=r"tuned_regions\[0\]\.check: 'compared' is a required property"):
        read_loop_report(report, "compare.json")


def test_the_number_of_runs_is_bounded_by_the_regions_and_max_rounds():
    measure = Synthetic({"a": -1.0, "b": -1.0, "c": -1.0}, jitter=[0.0, 20.0, -20.0])  # never settles
    config = VerifyConfig(min_rounds=3, max_rounds=7)

    verify_regions(["a", "b", "c"], measure, config)

    assert len(measure.calls) <= (3 + 1) * (2 * config.max_rounds + 2)


class RotatingLengths:
    """A service's workload on synthetic timings: its calls rotate through lengths that cost 50, 400, 100 and 800
    µs in eager, a tuned region takes ``saving`` off every call, and each call's time gets the next jitter."""

    COSTS = (50.0, 400.0, 100.0, 800.0)

    def __init__(self, saving: float, calls_per_measure: int):
        self.saving, self.calls_per_measure = saving, calls_per_measure
        self.position, self.jitter = 0, itertools.cycle([0.0, 1.5, -1.0, 0.5, -1.5])

    def __call__(self, enabled):
        times = []
        for _ in range(self.calls_per_measure):
            cost = self.COSTS[self.position % len(self.COSTS)]
            self.position += 1
            times.append(cost * (1 - self.saving * bool(enabled)) + next(self.jitter))
        return times


def test_calls_that_rotate_inputs_are_paired_on_the_same_call_of_the_cycle_so_the_interval_measures_the_backend():
    cycle = len(RotatingLengths.COSTS)
    unpaired = verify_regions(["encoder"], RotatingLengths(0.2, 1), VerifyConfig(min_rounds=20, max_rounds=20))
    paired = verify_regions(
        ["encoder"], RotatingLengths(0.2, cycle), VerifyConfig(min_rounds=20, max_rounds=20, cycle=cycle)
    )

    loose, tight = unpaired.end_to_end, paired.end_to_end
    assert loose is None or loose.ci_high / loose.ci_low > 4  # eager and tuned saw different lengths
    assert tight.median == pytest.approx(1 / 0.8, rel=0.01)
    assert tight.ci_high / tight.ci_low <= 1.35
    assert [call.median for call in tight.per_call] == pytest.approx([1.25] * cycle, rel=0.05)
    assert tight.per_call_shown().startswith("call 1 of 4: 1.2")


def test_a_cycle_s_per_call_figures_read_back_from_a_report_and_old_figures_still_read():
    figure = PairedSpeedup(8, 1.25, 1.2, 1.3, (PairedSpeedup(8, 1.3, 1.2, 1.4), PairedSpeedup(8, 1.2, 1.1, 1.3)))
    report = report_with_check(json.loads(json.dumps(dataclasses.asdict(figure))))

    assert read_loop_report(report, "compare.json").regions[0].check.speedup == figure
    old = report_with_check({"rounds": 6, "median": 1.1, "ci_low": 1.0, "ci_high": 1.2})
    assert read_loop_report(old, "compare.json").regions[0].check.speedup.per_call == ()
    speedup = report["tuned_regions"][0]["check"]["speedup"]
    speedup["per_call"][0]["per_call"] = [speedup["per_call"][1]]  # figures inside figures: not a report's
    with pytest.raises(
        ProfileError, match=r"tuned_regions\[0\]\.check\.speedup\.per_call\[0\]\.per_call: .* is too long \(at most 0\)"
    ):
        read_loop_report(report, "compare.json")


def report_with_check(speedup: dict) -> dict:
    """A compare report of one tuned region whose end-to-end check holds ``speedup``, as written."""
    check = {"path": "a", "kept": True, "compared": END_TO_END, "speedup": speedup}
    return {
        "domain": "cpu",
        "speedup": {"value": 1.25, "ci_low": 1.2, "ci_high": 1.3, "source": "verified", "rounds": 8},
        "tuned_regions": [{"path": "a", "winner": "onnxruntime", "check": check}],
    }
