"""Multi-scenario profiles in the viewer: a scenario picker narrows every table, compare and trace (no server)."""

from pathlib import Path

from aitune import compare
from aitune.report import load, select_scenario
from aitune.viewer.app import pickers, scenario_picker
from aitune.viewer.sources import Loaded
from aitune.viewer.store import ProfileStore

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
SCENARIOS = "scenarios-batch.profile.json"


def test_choosing_a_scenario_narrows_the_tables_the_diff_and_the_trace():
    store = ProfileStore(runs_dir=SAMPLES)
    store.open_names(SCENARIOS, SCENARIOS)

    store.scenario = "batch4"
    diff = store.compare_now("cpu")

    batch4 = select_scenario(load(SAMPLES / SCENARIOS), "batch4")
    assert store.scenarios() == ["batch1", "batch4"]
    assert diff.scenario == "batch4"
    assert diff.run_time.before_us == compare.compare_profiles(batch4, batch4).run_time.before_us
    assert store.run_table()["cpu_time_us"].tolist()[:6] == [run.timing.cpu_time_us for run in batch4.runs]
    assert store.trace_path("before").name == "scenarios-batch.batch4.trace.json.gz"


def test_the_scenario_picker_offers_the_scenarios_and_hides_for_single_input_profiles():
    store = ProfileStore(runs_dir=SAMPLES)
    picker = scenario_picker(store)

    store.open_names(SCENARIOS)
    offered, shown = list(picker.options), picker.visible
    picker.value = "batch4"
    chosen = store.scenario
    store.open_names("tuned-pipeline/before/profile.json")

    assert (offered, shown, chosen) == (["batch1", "batch4"], True, "batch4")
    assert (picker.visible, store.scenario) == (False, None)


def test_the_folder_pickers_follow_an_upload():
    store = ProfileStore(runs_dir=SAMPLES)
    store.open_names("tuned-pipeline/before/profile.json", "tuned-pipeline/after/profile.json")
    before, after = pickers(store).objects[1:3]

    store.open_uploads({"mine.json": (SAMPLES / "tuned-pipeline/after/profile.json").read_bytes()})

    assert (before.value, after.value) == ("(none)", "(none)")


def test_a_single_input_profile_ignores_a_scenario_name():
    loaded = Loaded("one.json", load(SAMPLES / "tuned-pipeline/before/profile.json"))

    assert loaded.scenario("batch4") is loaded
