"""Lite captures: regions, tree and run timing from clock stamps, without the profiler, through every reader."""

import pytest
import torch
from busy import BusyPipeline, TwoLevelModel, first_measured_call, median_gap
from cli_helpers import capture_busy_app, run_cli
from documents import region_shares, tree_shape

import aitune.torch as ait
from aitune import compare
from aitune.errors import CaptureError
from aitune.report import LITE_LACKS, load, render_markdown, validate
from aitune.suggest import suggest
from aitune.viewer.sources import Loaded
from aitune.viewer.store import ProfileStore

LITE = {"warmup_runs": 1, "measured_runs": 3, "mode": "lite"}


@pytest.fixture(scope="module")
def lite_and_full():
    model = TwoLevelModel()
    lite = ait.profile(model, torch.ones(1, 4), **LITE).data
    full = ait.profile(model, torch.ones(1, 4), warmup_runs=1, measured_runs=3).data
    return lite, full


def test_a_lite_document_says_it_is_lite_and_holds_no_operator_data(lite_and_full):
    lite, _ = lite_and_full

    assert lite["profiler"]["mode"] == "lite"
    assert lite["config"]["mode"] == "lite"
    assert "key_averages" not in lite["profiler"]
    assert all("causes" not in run["residual"] for run in lite["runs"])
    assert all("operators" not in node for run in lite["runs"] for node in run["tree"])


def test_a_lite_document_is_valid_and_adds_up_at_every_level(lite_and_full):
    lite, _ = lite_and_full

    assert validate(lite) == []  # includes Σ = 1 per run and children + self = total at every tree node


def test_a_lite_capture_has_the_full_captures_regions_and_tree(lite_and_full):
    lite, full = lite_and_full

    assert [region["id"] for region in lite["regions"]] == [region["id"] for region in full["regions"]]
    assert tree_shape(lite["runs"][0]["tree"]) == tree_shape(full["runs"][0]["tree"])


def test_lite_region_shares_match_the_work_the_modules_measured_themselves():
    pipe = BusyPipeline()

    prof = ait.profile(pipe, torch.ones(1, 4), warmup_runs=1, measured_runs=5, mode="lite")

    pairs: dict[str, list[tuple[float, float]]] = {"encoder": [], "denoiser": []}
    for index, run in enumerate(prof.data["runs"]):
        # the runs follow the warmups (runs set aside as still warming up among them) and the shapes' warmup
        call, total = first_measured_call(prof.data) + index, run["timing"]["cpu_time_us"]
        got = region_shares(run)
        pairs["encoder"].append((got["untuned_module:encoder"], pipe.encoder.spent_us[call] / total))
        pairs["denoiser"].append((got["untuned_module:denoiser"], pipe.denoiser.spent_us[call] / total))
    assert {key: median_gap(value) for key, value in pairs.items()} == {
        "encoder": pytest.approx(0, abs=0.03),
        "denoiser": pytest.approx(0, abs=0.03),
    }


def test_the_saved_lite_trace_reanalysed_gives_the_same_runs(tmp_path):
    trace = tmp_path / "trace.json.gz"

    live = ait.profile(TwoLevelModel(), torch.ones(1, 4), trace_file=trace, **LITE)

    assert ait.analyze_trace(trace).data["runs"] == live.data["runs"]


def test_markdown_says_the_capture_is_lite_and_has_no_operator_table(lite_and_full):
    lite, _ = lite_and_full

    text = render_markdown(lite)

    assert f"Lite capture: {LITE_LACKS}" in text
    assert "Residual causes" not in text


def test_compare_lines_up_a_lite_capture_with_a_full_one(lite_and_full):
    lite, full = lite_and_full

    diff = compare.compare_profiles(full, lite)

    assert {change.path for change in diff.regions} >= {"block"}


def test_suggest_says_a_lite_capture_has_no_operator_mix(lite_and_full):
    lite, _ = lite_and_full

    found = suggest(lite)

    codes = {reason.code for target in found.targets for reason in target.reasons}
    assert "NO_OPERATOR_MIX" in codes


def test_the_viewer_store_shows_a_lite_capture_with_an_empty_operator_table(lite_and_full):
    lite, _ = lite_and_full
    store = ProfileStore(before=Loaded("lite.json", lite))

    regions = store.region_table("cpu")

    assert "block" in regions["path"].tolist()
    assert store.operator_table("cpu").empty


def test_profiler_options_are_refused_in_a_lite_capture():
    with pytest.raises(CaptureError, match="lite capture runs no profiler"):
        ait.profile(TwoLevelModel(), torch.ones(1, 4), record_shapes=True, **LITE)


def test_the_cli_captures_lite_with_the_lite_flag(tmp_path):
    written = capture_busy_app(tmp_path / "lite", "--lite")

    doc = load(written)
    assert doc.profiler.mode == "lite"
    assert "lite capture" in run_cli("report", str(written), check=True).stdout
