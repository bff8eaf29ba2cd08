"""The one end-to-end figure a user reads after tuning (`aitune.compare.end_to_end`): the verified one, wherever it
is shown, with the captures labelled as theirs and a line when the two disagree."""

import json

import pytest
from documents import profile

from aitune.cli.pages import pair_page
from aitune.compare import compare_profiles
from aitune.compare.end_to_end import CAPTURES, NOTHING_TUNED, VERIFIED, EndToEnd, captures_line, end_to_end
from aitune.compare.gains import region_gains, speedup
from aitune.compare.loop_report import compare_report, read_loop_report
from aitune.compare.verification import END_TO_END, PairedSpeedup, RegionCheck, Verification
from aitune.suggest import Forecast
from aitune.viewer.overview import tuned_line

FORECASTS = {"vae": Forecast("vae", "untuned_module:vae", predicted_speedup=1.2, predicted_region_speedup=2.0)}
VERIFIED_FIGURE = PairedSpeedup(rounds=12, median=1.05, ci_low=1.02, ci_high=1.08)


def captured_pair():
    """Captures that say 150 → 120 µs a run (1.25×) for a ``vae`` tuned from 40 to 10 µs."""
    before = profile([{"untuned_module:unet": 100.0, "untuned_module:vae": 40.0}] * 6)
    after = profile([{"untuned_module:unet": 100.0, "aot_module:vae": 10.0}] * 6)
    return compare_profiles(before, after), before, after


def verified(kept: bool = True) -> Verification:
    return Verification([RegionCheck("vae", kept, END_TO_END, VERIFIED_FIGURE)], VERIFIED_FIGURE if kept else None)


def written(verification, winner="onnxruntime"):
    diff, *_ = captured_pair()
    checks = {check.path: check for check in verification.checks} if verification is not None else None
    gains = region_gains(FORECASTS, diff, {"vae": (winner, None)}, None, checks)
    return json.loads(json.dumps(compare_report(diff, gains, verification=verification))), diff


def test_the_speedup_a_user_reads_is_the_verified_one_and_the_captures_keep_their_own_key():
    report, diff = written(verified())

    assert report["speedup"] == {"value": 1.05, "ci_low": 1.02, "ci_high": 1.08, "source": VERIFIED, "rounds": 12}
    assert report["captures_speedup"] == dict(zip(("value", "ci_low", "ci_high"), speedup(diff.run_time), strict=True))
    assert report["captures_speedup"]["value"] == pytest.approx(1.25)


def test_each_tuned_region_realises_its_verified_figure_and_keeps_the_captures_beside_it():
    report, _ = written(verified())

    (gain,) = read_loop_report(report, "compare.json").regions

    assert gain.realised_speedup == 1.05
    assert gain.captured_speedup == pytest.approx(150 / 120)
    assert gain.prediction_error == pytest.approx(1.2 / 1.05)


def test_captures_outside_the_verified_interval_are_said_to_differ_in_one_line():
    figure = EndToEnd(VERIFIED, 1.60, 1.55, 1.69, 12)

    line = captures_line(figure, (2.82, 2.13, 2.86))

    assert line == (
        "the captures differ from the verified figure (2.82× [2.13, 2.86] against 1.60× [1.55, 1.69]): drift or "
        "profiler cost; read the captures for where the time moved, the verified figure for how much"
    )
    assert captures_line(figure, (1.62, 1.40, 1.80)) is None
    assert captures_line(EndToEnd(CAPTURES, 2.82, 2.13, 2.86), (2.82, 2.13, 2.86)) is None


def test_where_nothing_stayed_tuned_nothing_claims_a_speedup():
    report, _ = written(verified(kept=False))

    read = read_loop_report(report, "compare.json")

    assert report["speedup"]["value"] is None and report["speedup"]["source"] == NOTHING_TUNED
    assert read.end_to_end.shown() == "nothing stayed tuned, so the model runs as before (no speedup is claimed)"
    assert read.regions[0].realised_shown == (None, None)


def test_a_loop_told_not_to_verify_shows_the_captures_labelled_as_such():
    report, diff = written(None)

    figure = read_loop_report(report, "compare.json").end_to_end

    assert figure == EndToEnd(CAPTURES, *speedup(diff.run_time))
    assert figure.shown().endswith("from the two captures (not verified in alternating rounds)")


def test_a_report_written_before_the_figure_had_a_source_reads_as_the_captures():
    report, diff = written(verified())
    report["speedup"] = report.pop("captures_speedup")

    read = read_loop_report(report, "compare.json")

    assert read.end_to_end == EndToEnd(CAPTURES, *speedup(diff.run_time))
    assert read.captures == speedup(diff.run_time)


def test_the_pair_page_and_the_viewer_lead_with_the_verified_figure_and_label_the_captures():
    report, _ = written(verified())
    read = read_loop_report(report, "compare.json")
    diff, before, after = captured_pair()

    page = pair_page(before, after, diff, read)
    line = tuned_line(read)

    shown = "1.05× [1.02, 1.08] faster, verified over 12 alternating eager/tuned rounds in one process"
    assert f"End to end: {shown}" in page
    assert "Speedup of the two captures before ÷ after [95% CI]" in page
    assert "the captures differ from the verified figure (1.25×" in page
    assert shown in line and "the two captures: 1.25×" in line


def test_the_figure_is_computed_once_from_the_diff_the_gains_and_the_verification():
    diff, *_ = captured_pair()
    gains = region_gains(FORECASTS, diff, {"vae": ("onnxruntime", None)}, None, {"vae": verified().checks[0]})

    assert end_to_end(diff, gains, verified()) == EndToEnd(VERIFIED, 1.05, 1.02, 1.08, 12)
    assert end_to_end(diff, gains, None).source == CAPTURES
    assert end_to_end(diff, [], verified()).source == NOTHING_TUNED
