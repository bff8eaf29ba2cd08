"""Run statistics on hand-computed data, and the warnings they justify."""

import random

import pytest
from builders import region, run, trace

from aitune.analysis.statistics import (
    capture_overhead,
    is_steady,
    outlier_indices,
    percentile,
    run_time_warnings,
    summarize,
)
from aitune.report import build_profile, validate


def test_summary_matches_a_hand_computation():
    values = [10.0, 12.0, 11.0, 13.0, 14.0]

    summary = summarize(values)

    assert summary["median"] == 12.0
    assert summary["mean"] == 12.0
    assert summary["std"] == pytest.approx(2**0.5)  # population std: sqrt((4+0+1+1+4)/5)
    assert summary["p10"] == pytest.approx(10.4)  # 10 + 0.4 * (11 - 10)
    assert summary["p90"] == pytest.approx(13.6)  # 13 + 0.6 * (14 - 13)
    assert summary["cv"] == pytest.approx(2**0.5 / 12)
    assert (summary["min"], summary["max"], summary["count"]) == (10.0, 14.0, 5)


def test_percentile_of_one_value_is_that_value():
    assert percentile([7.0], 90) == 7.0


def test_a_slow_run_is_an_outlier_by_index():
    assert outlier_indices([100.0, 101.0, 99.0, 100.5, 180.0, 100.2]) == [4]


def test_identical_runs_have_no_outliers():
    assert outlier_indices([5.0, 5.0, 5.0]) == []


def test_an_injected_slow_run_is_warned_about_by_index():
    runs = [run(i, i * 1000, i * 1000 + 100) for i in range(6)]
    walls = [100.0, 101.0, 99.0, 100.0, 300.0, 100.5]

    doc = build_profile(trace(*runs, region("untuned_module:a", 0, 50), run_wall_times_us=walls))

    outliers = [w for w in doc["warnings"] if w["code"] == "RUN_OUTLIERS"]
    assert len(outliers) == 1 and outliers[0]["message"].startswith("run(s) 4 have a wall time")
    assert not any(w["code"] == "HIGH_RUN_VARIANCE" for w in doc["warnings"])  # one slow run leaves the median


def quiet_runs(rng: random.Random, count: int = 10, median_us: float = 50_000.0) -> list[float]:
    """Run times of a quiet machine: 2% Gaussian noise plus now and then a small stall (up to 5%)."""
    return [
        median_us * (1 + rng.gauss(0, 0.02) + (rng.random() * 0.05 if rng.random() < 0.1 else 0.0))
        for _ in range(count)
    ]


def test_quiet_captures_raise_no_run_warning_in_nine_of_ten():
    rng = random.Random(13)

    alarmed = [bool(run_time_warnings("wall time", quiet_runs(rng))) for _ in range(200)]

    assert sum(alarmed) <= len(alarmed) // 10


def test_one_injected_slow_run_is_always_flagged_by_its_index():
    rng = random.Random(5)

    for _ in range(200):
        walls = quiet_runs(rng)
        walls[5] *= 1.25  # a sleep in run 5: a quarter of a run
        codes = {w["code"]: w["message"] for w in run_time_warnings("wall time", walls)}
        assert codes["RUN_OUTLIERS"].startswith("run(s) 5 have")


def test_runs_that_spread_as_a_whole_raise_high_variance():
    rng = random.Random(7)

    walls = [50_000.0 * (1 + rng.gauss(0, 0.2)) for _ in range(10)]

    assert "HIGH_RUN_VARIANCE" in {w["code"] for w in run_time_warnings("wall time", walls)}


def test_document_statistics_cover_runs_regions_and_residual():
    doc = build_profile(
        trace(
            run(0, 0, 100),
            region("untuned_module:a", 0, 40),
            run(1, 200, 300),
            region("untuned_module:a", 200, 260),
            run(2, 400, 500),  # region absent: counts as 0 in this run
            run_wall_times_us=[110.0, 100.0, 120.0],
        )
    )

    stats = doc["statistics"]
    assert validate(doc) == []
    assert stats["runs"]["wall_time_us"]["median"] == 110.0
    assert stats["regions"][0]["region_id"] == "untuned_module:a"
    assert stats["regions"][0]["cpu_time_us"]["median"] == 40.0
    assert stats["regions"][0]["cpu_time_fraction"]["p90"] == pytest.approx(0.56)  # sorted [0, .4, .6] at 1.8
    assert stats["residual"]["cpu_time_fraction"]["median"] == pytest.approx(0.6)


def test_capture_overhead_is_the_median_run_over_the_median_warm_warmup_with_an_interval():
    warmups = [900.0, 300.0, 104.0, 100.0, 98.0, 101.0]  # the cold first and early warm ones are left out
    runs = [110.0, 112.0, 108.0, 109.0, 150.0]

    overhead = capture_overhead(warmups, runs)

    assert overhead["plain_wall_time_us"] == pytest.approx(100.5)  # median of 104, 100, 98, 101
    assert overhead["captured_wall_time_us"] == 110.0
    assert overhead["ratio"] == pytest.approx(110 / 100.5)
    assert (overhead["plain_samples"], overhead["first_wall_time_us"]) == (4, 900.0)
    assert overhead["ratio_low"] <= overhead["ratio"] <= overhead["ratio_high"]


def test_capture_overhead_is_right_on_average_when_both_sides_share_the_noise():
    """Plain calls and captured runs drawn from one noisy distribution, 5% apart: the median estimate
    centres on 1.05 (a minimum-based one drifts with luck), and its interval covers the truth."""
    rng = random.Random(3)
    estimates, covered = [], 0
    for _ in range(100):
        plain = [1000.0 * (1 + abs(rng.gauss(0, 0.03))) for _ in range(7)]
        captured = [1050.0 * (1 + abs(rng.gauss(0, 0.03))) for _ in range(10)]
        overhead = capture_overhead(plain, captured)
        estimates.append(overhead["ratio"])
        covered += overhead["ratio_low"] <= 1.05 <= overhead["ratio_high"]

    assert sorted(estimates)[50] == pytest.approx(1.05, abs=0.01)
    assert min(estimates) > 1.0
    assert covered >= 85


def test_warmups_are_steady_once_their_time_stops_falling():
    assert not is_steady([900.0, 300.0, 150.0, 120.0])
    assert is_steady([900.0, 300.0, 120.0, 100.0, 101.0, 99.0, 100.0])
    assert is_steady([100.0, 99.0, 130.0, 100.0])  # a slower call is noise, not warming up
    assert not is_steady([100.0, 100.0, 100.0])  # too few to tell


def test_capture_overhead_needs_a_warm_baseline():
    assert capture_overhead([500.0], [110.0]) is None


def test_high_overhead_is_warned_about():
    doc = build_profile(
        trace(
            run(0, 0, 100),
            region("untuned_module:a", 0, 40),
            warmup_wall_times_us=[300.0, 50.0, 50.0],
            run_wall_times_us=[100.0],
        )
    )

    assert doc["capture_overhead"]["ratio"] == 2.0
    assert "INSTRUMENTATION_OVERHEAD" in [w["code"] for w in doc["warnings"]]
