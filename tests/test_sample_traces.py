"""The committed sample_traces/ are current: valid documents of this schema version, and a tune folder
whose reports are what this code makes of its two profiles (regenerate with scripts/make_sample_traces.py)."""

import dataclasses
from pathlib import Path

import orjson
import pytest

from aitune import suggest
from aitune.compare import compare_profiles
from aitune.compare.gains import region_gains, speedup
from aitune.compare.loop_report import AFTER_FOLDER, BEFORE_FOLDER, COMPARE_REPORT, REPORT_FILES, read_loop_report
from aitune.report import SCHEMA_VERSION, validate
from aitune.suggest.forecast import read_forecasts
from aitune.viewer import sources

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
TUNED = SAMPLES / "tuned-pipeline"
PROFILES = sources.list_profiles(SAMPLES)


def read(path: Path):
    return orjson.loads(path.read_bytes())


def test_the_samples_hold_a_tune_folder_and_a_two_scenario_profile():
    assert [
        "scenarios-batch.profile.json",
        f"tuned-pipeline/{AFTER_FOLDER}/profile.json",
        f"tuned-pipeline/{BEFORE_FOLDER}/profile.json",
    ] == PROFILES
    assert sorted(path.name for path in TUNED.glob("*.json")) == sorted(REPORT_FILES)


@pytest.mark.parametrize("name", PROFILES)
def test_every_sample_profile_validates_and_is_of_this_schema_version(name):
    doc = read(SAMPLES / name)

    assert validate(doc) == []
    assert doc["schema_version"] == SCHEMA_VERSION


def test_the_tune_folders_suggestions_are_of_this_version_and_recommend_what_suggest_does_today():
    written = read(TUNED / "suggestions.json")

    found = suggest.suggest(read(TUNED / BEFORE_FOLDER / "profile.json"))

    assert (written["schema_version"], written["kind"]) == (suggest.SCHEMA_VERSION, suggest.KIND)
    assert written["recommended"] == [target.path for target in found.recommended()]


def test_the_tune_folders_compare_report_is_what_compare_and_gains_make_of_its_profiles():
    before, after = read(TUNED / BEFORE_FOLDER / "profile.json"), read(TUNED / AFTER_FOLDER / "profile.json")
    written = read(TUNED / COMPARE_REPORT)
    report = read_loop_report(written, COMPARE_REPORT)

    diff = compare_profiles(before, after)
    outcomes = {gain.path: (gain.winner, gain.reason) for gain in report.regions}
    checks = {gain.path: gain.check for gain in report.regions if gain.check is not None}  # the loop's own check

    assert report.captures == speedup(diff.run_time)
    gains = region_gains(
        read_forecasts(read(TUNED / "suggestions.json"), "suggestions.json"), diff, outcomes, checks=checks
    )
    # The committed folder was written before a region's realised gain became its verified figure: its
    # realised_speedup is the captures' figure, which region_gains now keeps as captured_speedup.
    assert report.regions == [
        dataclasses.replace(gain, realised_speedup=gain.captured_speedup, captured_speedup=None) for gain in gains
    ]
    assert [row["path"] for row in written["headline"]] == [row.path for row in diff.headline]
