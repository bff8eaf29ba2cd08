"""Run statistics on hand-computed data, and the warnings they justify."""

import pytest
from builders import region, run, trace

from aitune.analysis.statistics import capture_overhead, outlier_indices, percentile, summarize
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
    assert any(w["code"] == "HIGH_RUN_VARIANCE" for w in doc["warnings"])


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


def test_capture_overhead_compares_the_fastest_run_with_the_fastest_warm_uninstrumented_call():
    overhead = capture_overhead([50.0, 104.0, 100.0], [110.0, 112.0, 108.0])  # the cold first warmup is ignored

    assert overhead == {
        "plain_wall_time_us": 100.0,
        "captured_wall_time_us": 108.0,
        "ratio": pytest.approx(108 / 100),
        "plain_samples": 2,
        "first_wall_time_us": 50.0,
    }


def test_capture_overhead_needs_a_warm_baseline():
    assert capture_overhead([500.0], [110.0]) is None


def test_high_overhead_is_warned_about():
    doc = build_profile(
        trace(
            run(0, 0, 100),
            region("untuned_module:a", 0, 40),
            warmup_wall_times_us=[300.0, 50.0],
            run_wall_times_us=[100.0],
        )
    )

    assert doc["capture_overhead"]["ratio"] == 2.0
    assert "INSTRUMENTATION_OVERHEAD" in [w["code"] for w in doc["warnings"]]
