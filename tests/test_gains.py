"""Predicted against realised gain (`aitune.compare.gains`) and the tune folder's compare report read back."""

import dataclasses
import json

import pytest
from documents import profile

from aitune.compare import compare_profiles
from aitune.compare.end_to_end import CAPTURES, EndToEnd
from aitune.compare.gains import region_gains, speedup, weigh_whole_model
from aitune.compare.loop_report import LoopReport, read_compare_report, read_loop_report
from aitune.compare.loop_report import compare_report as write_compare_report
from aitune.errors import ProfileError
from aitune.report import dumps
from aitune.suggest import Forecast, Suggestions, Target
from aitune.suggest.forecast import read_forecasts

SUGGESTED = {"vae": Forecast("vae", "untuned_module:vae.decode", predicted_speedup=1.2, predicted_region_speedup=2.0)}


def tuned_pair():
    """A flat entry method before (as AITune's files and ``max_depth=1`` captures have it), its wrapper after."""
    before = profile(
        [{"untuned_module:unet": 100.0, "untuned_module:vae.decode": 40.0}] * 3,
        methods={"untuned_module:vae.decode": "decode"},
    )
    after = profile([{"untuned_module:unet": 100.0, "aot_module:vae": 10.0}] * 3)
    return before, after


def compare_report(before, after, outcomes):
    """What `aitune-profile tune` writes as compare.json (`LoopResult.comparison`), through JSON."""
    diff = compare_profiles(before, after)
    return json.loads(json.dumps(write_compare_report(diff, region_gains(SUGGESTED, diff, outcomes))))


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
    assert report.captures == speedup(diff.run_time)
    assert report.end_to_end == EndToEnd(CAPTURES, *speedup(diff.run_time))  # nothing verified it
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
        (lambda report: report.update(domain="gpu"), "domain: 'gpu' is not one of 'cpu', 'device'"),
        (lambda report: report.update(speedup=[1.2]), "speedup: [1.2] is not of type 'object'"),
        (
            lambda report: report["speedup"].update(source="guessed"),
            "speedup.source: 'guessed' is not one of 'verified', 'captures', 'nothing tuned'",
        ),
        (
            lambda report: report["captures_speedup"].update(value="fast"),
            "captures_speedup.value: 'fast' is not of type 'number' or 'null'",
        ),
        (lambda report: report["tuned_regions"].append(7), "tuned_regions[1]: 7 is not of type 'object'"),
        (
            lambda report: report["tuned_regions"][0].update(winner=None),
            "tuned_regions[0].winner: None is not of type 'string'",
        ),
        (
            lambda report: report["tuned_regions"][0].update(realised_speedup=True),
            "tuned_regions[0].realised_speedup: True is not of type 'number' or 'null'",
        ),
    ],
)
def test_a_bad_compare_report_is_one_sentence_naming_the_field(change, sentence):
    report = compare_report(*tuned_pair(), {"vae": ("onnxruntime", None)})
    change(report)

    with pytest.raises(ProfileError) as error:
        read_loop_report(report, "run/compare.json")

    assert str(error.value) == f"run/compare.json: {sentence}; write the folder again with `aitune-profile tune`."


def suggested(*targets: tuple[str, float, float], runs: int = 3) -> Suggestions:
    """suggest's record of targets (path, share, predicted region speedup) over ``runs`` runs of 100 µs, each
    target taking its share of every run."""
    return Suggestions(
        domain="cpu",
        run_time_us=100.0,
        targets=tuple(
            Target(
                path=path,
                region_id=f"untuned_module:{path}",
                module_type=None,
                share=share,
                share_low=share,
                share_high=share,
                time_per_run_us=100.0 * share,
                calls_per_run=1.0,
                time_per_call_us=100.0 * share,
                upper_bound_speedup=1 / (1 - share),
                predicted_region_speedup=region_speedup,
                predicted_speedup=1 / ((1 - share) + share / region_speedup),
                recommended=True,
                reasons=(),
                times_us=(100.0 * share,) * runs,
            )
            for path, share, region_speedup in targets
        ),
        advice=(),
        run_times=(100.0,) * runs,
    )


def test_the_whole_model_is_chosen_when_it_covers_more_for_one_build():
    found = suggested(("blocks.0", 0.4, 1.5), ("blocks.1", 0.4, 1.5), ("head", 0.1, 1.2))

    whole = weigh_whole_model(found, ["blocks.0", "blocks.1"])

    assert whole.chosen and whole.predicted_speedup > whole.separate_predicted_speedup
    assert whole.predicted_speedup == found.combined(found.targets)[0]  # suggest's own "all together" figure
    assert whole.reason.startswith("one build instead of 2")


def test_separate_regions_win_when_the_outer_module_is_forecast_no_gain():
    found = suggested(("model", 0.9, 1.0), ("model.a", 0.45, 2.0), ("model.b", 0.45, 2.0))

    whole = weigh_whole_model(found, ["model.a", "model.b"])

    assert not whole.chosen and whole.reason.startswith("separate regions win")
    assert whole.separate_predicted_speedup == found.combined(found.targets[1:])[0]


def test_the_whole_model_leaves_out_what_its_entry_method_runs_beside_the_roots_forward():
    found = suggested(("decoder", 0.6, 2.0), ("encoder", 0.3, 2.0))
    encoder = dataclasses.replace(found.targets[1], outside_root=True)  # a generate's encoder, via get_encoder
    found = dataclasses.replace(found, targets=(found.targets[0], encoder))

    whole = weigh_whole_model(found, ["decoder", "encoder"])

    assert whole.predicted_speedup == found.combined(found.targets[:1])[0]  # the decoder only
    assert not whole.chosen and whole.separate_predicted_speedup == found.combined(found.targets)[0]
    assert whole.reason.endswith("the whole leaves encoder eager: it runs outside the root's forward)")


def test_one_chosen_region_leaves_nothing_to_weigh():
    assert weigh_whole_model(suggested(("unet", 0.5, 2.0)), ["unet"]) is None


def test_the_forecasts_read_back_from_the_suggestions_file_are_the_ones_suggest_made():
    found = suggested(("vae", 0.4, 2.0), ("unet", 0.5, 1.5))

    read = read_forecasts(json.loads(json.dumps(found.to_dict())), "suggestions.json")

    assert read == found.forecasts()
    assert read["vae"] == Forecast("vae", "untuned_module:vae", found.targets[0].predicted_speedup, 2.0)


@pytest.mark.parametrize(
    ("change", "sentence"),
    [
        (
            lambda raw: raw.update(targets="vae"),
            "has no targets list, so it is not what `aitune-profile suggest --json` writes",
        ),
        (lambda raw: raw["targets"][0].update(path=7), "targets[0].path: 7 is not of type 'string'"),
        (
            lambda raw: raw["targets"][0].update(predicted_speedup="fast"),
            "targets[0].predicted_speedup: 'fast' is not of type 'number'",
        ),
        (
            lambda raw: raw["targets"][0].update(predicted_speedup=-1.0),
            "targets[0].predicted_speedup: -1.0 is less than the minimum of 0",
        ),
    ],
    ids=["no-targets", "path", "not-a-number", "negative"],
)
def test_a_bad_suggestions_file_is_one_sentence_naming_the_field(change, sentence):
    raw = json.loads(json.dumps(suggested(("vae", 0.4, 2.0)).to_dict()))
    change(raw)

    with pytest.raises(ProfileError) as error:
        read_forecasts(raw, "run/suggestions.json")

    assert str(error.value) == (
        f"run/suggestions.json: {sentence}; write it again with `aitune-profile suggest --json` or `tune`."
    )


def test_the_compare_report_written_to_a_file_reads_back_through_the_bounded_reader(tmp_path):
    before, after = tuned_pair()
    diff = compare_profiles(before, after)
    gains = region_gains(SUGGESTED, diff, {"vae": ("onnxruntime", None)})
    path = tmp_path / "compare.json"
    path.write_bytes(dumps(write_compare_report(diff, gains)))

    report = read_compare_report(path, "compare.json")

    assert report == LoopReport("cpu", EndToEnd(CAPTURES, *speedup(diff.run_time)), speedup(diff.run_time), gains)


def test_a_compare_report_that_is_not_json_is_one_sentence_naming_the_file(tmp_path):
    path = tmp_path / "compare.json"
    path.write_text('{"tuned_regions": [')

    with pytest.raises(ProfileError, match=r"compare\.json"):
        read_compare_report(path, "compare.json")
