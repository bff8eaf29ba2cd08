"""Predicted against realised gain (`aitune.compare.gains`) and the tune folder's compare report read back."""

import json

import pytest
from diff_docs import profile, with_method

from aitune.compare import compare_profiles
from aitune.compare.gains import region_gains, speedup, weigh_whole_model
from aitune.compare.loop_report import read_loop_report
from aitune.errors import ProfileError

SUGGESTED = {
    "targets": [
        {
            "path": "vae",
            "region_id": "untuned_module:vae.decode",
            "predicted_speedup": 1.2,
            "predicted_region_speedup": 2.0,
        }
    ]
}


def tuned_pair():
    """A flat entry method before (as AITune's files and ``max_depth=1`` captures have it), its wrapper after."""
    before = with_method(
        profile([{"untuned_module:unet": 100.0, "untuned_module:vae.decode": 40.0}] * 3),
        "untuned_module:vae.decode",
        "decode",
    )
    after = profile([{"untuned_module:unet": 100.0, "aot_module:vae": 10.0}] * 3)
    return before, after


def compare_report(before, after, outcomes):
    """What `aitune-profile tune` writes as compare.json (`LoopResult.comparison`), through JSON."""
    diff = compare_profiles(before, after)
    value, low, high = speedup(diff.run_time)
    report = {
        **diff.to_dict(),
        "speedup": {"value": value, "ci_low": low, "ci_high": high},
        "tuned_regions": [gain.to_dict() for gain in region_gains(SUGGESTED, diff, outcomes)],
    }
    return json.loads(json.dumps(report))


def test_a_flat_method_region_is_measured_against_the_wrapper_that_replaced_it():
    before, after = tuned_pair()

    (gain,) = region_gains(SUGGESTED, compare_profiles(before, after), {"vae": ("onnxruntime", None)})

    assert gain.realised_region_speedup == pytest.approx(4.0)
    assert gain.realised_speedup == pytest.approx(150 / 120)


def test_the_compare_report_reads_back_as_the_gains_and_the_speedup_it_was_written_from():
    before, after = tuned_pair()
    outcomes = {"vae": ("onnxruntime", None), "unet": ("eager", "onnxruntime: not 5% faster than eager")}

    report = read_loop_report(compare_report(before, after, outcomes), "compare.json")

    diff = compare_profiles(before, after)
    assert report.regions == region_gains(SUGGESTED, diff, outcomes)
    assert (report.speedup, report.ci_low, report.ci_high) == speedup(diff.run_time)
    assert report.domain == "cpu"
    assert [(gain.path, gain.tuned, gain.reason) for gain in report.regions] == [
        ("vae", True, None),
        ("unet", False, "onnxruntime: not 5% faster than eager"),
    ]


@pytest.mark.parametrize(
    ("change", "sentence"),
    [
        (
            lambda report: report.pop("tuned_regions"),
            "has no tuned_regions list, so it is not the compare report of `aitune-profile tune`",
        ),
        (lambda report: report.update(domain="gpu"), "domain 'gpu' is not one of cpu, device"),
        (lambda report: report.update(speedup=[1.2]), "has no speedup object"),
        (
            lambda report: report["speedup"].update(value="fast"),
            "speedup.value 'fast' is not a speedup (a number of at least 0, or null)",
        ),
        (lambda report: report["tuned_regions"].append(7), "tuned_regions[1] is not an object"),
        (
            lambda report: report["tuned_regions"][0].update(winner=None),
            "tuned_regions[0].winner None is not a string",
        ),
        (
            lambda report: report["tuned_regions"][0].update(realised_speedup=True),
            "tuned_regions[0].realised_speedup True is not a speedup (a number of at least 0, or null)",
        ),
    ],
)
def test_a_bad_compare_report_is_one_sentence_naming_the_field(change, sentence):
    report = compare_report(*tuned_pair(), {"vae": ("onnxruntime", None)})
    change(report)

    with pytest.raises(ProfileError) as error:
        read_loop_report(report, "run/compare.json")

    assert str(error.value) == f"run/compare.json: {sentence}; write the folder again with `aitune-profile tune`."


def test_the_whole_model_is_chosen_when_it_covers_more_for_one_build():
    suggestions = {
        "targets": [
            {"path": "blocks.0", "share": 0.4, "predicted_region_speedup": 1.5},
            {"path": "blocks.1", "share": 0.4, "predicted_region_speedup": 1.5},
            {"path": "head", "share": 0.1, "predicted_region_speedup": 1.2},
        ]
    }

    whole = weigh_whole_model(suggestions, ["blocks.0", "blocks.1"])

    assert whole.chosen and whole.predicted_speedup > whole.separate_predicted_speedup
    assert whole.reason.startswith("one build instead of 2")


def test_separate_regions_win_when_the_outer_module_is_forecast_no_gain():
    suggestions = {
        "targets": [
            {"path": "model", "share": 0.9, "predicted_region_speedup": 1.0},
            {"path": "model.a", "share": 0.45, "predicted_region_speedup": 2.0},
            {"path": "model.b", "share": 0.45, "predicted_region_speedup": 2.0},
        ]
    }

    whole = weigh_whole_model(suggestions, ["model.a", "model.b"])

    assert not whole.chosen and whole.reason.startswith("separate regions win")


def test_one_chosen_region_leaves_nothing_to_weigh():
    assert weigh_whole_model({"targets": []}, ["unet"]) is None
