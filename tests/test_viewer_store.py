"""The viewer's store and tables: parameters in, the tables the views lay out come back (no server)."""

import shutil
from pathlib import Path

import pytest
from documents import pipeline_doc, profile, with_warning

from aitune import compare
from aitune.analysis.statistics import outlier_indices
from aitune.report import dumps
from aitune.viewer import tables
from aitune.viewer.sources import Loaded
from aitune.viewer.store import ProfileStore

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
BEFORE, AFTER = "tuned-pipeline/before/profile.json", "tuned-pipeline/after/profile.json"


def pair_store(before, after) -> ProfileStore:
    return ProfileStore(before=Loaded("before.json", before), after=Loaded("after.json", after))


def test_region_shares_are_medians_per_path_with_the_residual_as_its_own_row():
    store = ProfileStore(before=Loaded("one.json", pipeline_doc(unet_us=65.0)))

    regions = store.region_table("cpu")

    assert regions["path"].tolist() == ["text_encoder", "unet", "vae.decode", tables.RESIDUAL]
    assert regions["fraction"].tolist() == pytest.approx([0.1, 0.65, 0.2, 0.05])
    assert set(regions["kind"]) == {"untuned", "residual"}


def test_a_region_that_became_managed_lines_up_by_path_and_is_marked_managed():
    store = pair_store(pipeline_doc(65.0), pipeline_doc(65.0, extra_region="aot_module:unet"))

    regions = store.region_table("cpu")

    assert regions.loc[regions["region_id"] == "aot_module:unet", ["path", "kind"]].values.tolist() == [
        ["unet", "managed"]
    ]


def test_the_overview_numbers_are_compares_own_once_compared():
    before, after = pipeline_doc(65.0), pipeline_doc(30.0)
    store = pair_store(before, after)
    assert store.comparison("cpu") is None

    diff = store.compare_now("cpu")

    assert diff == compare.compare_profiles(before, after, domain="cpu")
    assert store.comparison("cpu") is diff and store.compared == 1


def test_the_device_domain_falls_back_to_cpu_without_device_time():
    store = pair_store(pipeline_doc(65.0), pipeline_doc(30.0))

    assert store.compare_now("device").domain == "cpu"
    assert not store.has_device_time()


def test_operators_of_a_pair_are_compares_changes_with_a_delta():
    store = pair_store(pipeline_doc(65.0), pipeline_doc(30.0))

    operators = store.operator_table("cpu")

    assert operators.columns.tolist() == ["key", "device_type", "before_us", "after_us", "delta_us"]
    row = operators.iloc[0]
    assert row["delta_us"] == pytest.approx(row["after_us"] - row["before_us"])


def test_warnings_of_a_pair_are_marked_new_gone_or_persisting():
    before = with_warning(with_warning(pipeline_doc(65.0), "OLD_ONLY"), "BOTH")
    after = with_warning(with_warning(pipeline_doc(30.0), "NEW_ONLY"), "BOTH")

    store = pair_store(before, after)
    store.compare_now("cpu")

    warnings = store.warning_table()

    assert sorted(zip(warnings["code"], warnings["status"], strict=True)) == [
        ("BOTH", "persisting"),
        ("NEW_ONLY", "new"),
        ("OLD_ONLY", "gone"),
    ]


def test_runs_are_listed_per_side_and_a_slow_run_is_an_outlier():
    doc = pipeline_doc(65.0, runs=6)
    for run, wall_us in zip(doc["runs"], [100.0, 104.0, 10_000.0, 98.0, 101.0, 103.0], strict=True):
        run["timing"]["wall_time_us"] = wall_us

    runs = ProfileStore(before=Loaded("one.json", doc)).run_table()

    assert runs["outlier"].tolist() == [False, False, True, False, False, False]
    assert set(runs["side"]) == {"before"}


@pytest.mark.parametrize(
    ("walls_us", "marked"), [([1.0, 1.0, 9.0], [2]), ([1.0, 50.0], []), ([10.0, 11.0, 9.0, 10.0, 30.0], [4])]
)
def test_outlier_runs_are_the_ones_the_cores_rule_names(walls_us, marked):
    doc = pipeline_doc(65.0, runs=len(walls_us))
    for run, wall_us in zip(doc["runs"], walls_us, strict=True):
        run["timing"]["wall_time_us"] = wall_us

    runs = tables.run_timing(doc)

    assert runs.index[runs["outlier"]].tolist() == marked == outlier_indices(walls_us)


def test_opening_names_from_the_runs_folder_loads_the_pair_and_its_traces():
    store = ProfileStore(runs_dir=SAMPLES)

    assert store.open_names(BEFORE, AFTER)

    assert store.is_pair and store.problem == ""
    assert store.trace_path("after") == (SAMPLES / "tuned-pipeline" / "after" / "trace.json.gz").resolve()


def test_the_timeline_has_one_lane_per_region_in_run_order():
    store = ProfileStore(runs_dir=SAMPLES)
    store.open_names(BEFORE)

    spans = store.timeline("before", 0)

    assert list(dict.fromkeys(spans["lane"])) == [
        "text_encoder",
        "text_encoder.encoder",
        "text_encoder.encoder.layers.0",
        "text_encoder.encoder.layers.1",
        "unet",
        "unet.blocks.0",
        "unet.blocks.1",
        "unet.blocks.2",
        "vae.decode",
        "vae",  # the forward that vae.decode calls
        "vae.up",
    ]
    assert (spans["start_ms"] >= 0).all() and spans["start_ms"].is_monotonic_increasing


def test_a_refused_name_keeps_what_was_shown_and_says_why():
    store = ProfileStore(runs_dir=SAMPLES)
    store.open_names(BEFORE)

    assert not store.open_names("../../etc/passwd")

    assert store.before.name == BEFORE
    assert store.problem == "'../../etc/passwd' is outside the runs folder; name a file listed in the runs folder."


def test_uploads_open_one_or_two_files_in_order_and_refuse_more(tmp_path):
    store = ProfileStore(runs_dir=tmp_path)
    files = {"b.json": dumps(pipeline_doc(65.0)), "a.json": dumps(pipeline_doc(30.0))}

    assert store.open_uploads(files)
    assert [loaded.name for loaded in store.sides().values()] == ["b.json", "a.json"]
    assert not store.open_uploads({**files, "c.json": b"{}"})
    assert store.problem == "3 files were uploaded; upload one profile, or two to compare them."


def test_a_bad_upload_is_one_sentence_and_the_shown_profile_stays(tmp_path):
    (tmp_path / BEFORE).parent.mkdir(parents=True)
    shutil.copy(SAMPLES / BEFORE, tmp_path / BEFORE)
    store = ProfileStore(runs_dir=tmp_path)
    store.open_names(BEFORE)

    assert not store.open_uploads({"broken.json": b"{not json"})

    assert store.before.name == BEFORE
    assert store.problem.startswith("broken.json: not valid JSON")


def test_a_pair_shows_the_regions_compare_lines_up_a_method_with_the_child_tuned_in_its_place():
    bert = (990.0, {"untuned_module:bert.encoder": 900.0})  # 95% of the run, with regions inside it
    before = profile(
        [{"untuned_module:bert": bert, "untuned_module:vae.decode": 40.0}] * 2,
        methods={"untuned_module:vae.decode": "decode"},
    )
    after = profile([{"aot_module:bert": 400.0, "aot_module:vae.decoder": 10.0}] * 2)

    regions = pair_store(before, after).region_table("cpu")

    assert sorted(zip(regions["side"], regions["path"], strict=True)) == [
        ("after", "(residual)"),
        ("after", "bert"),
        ("after", "vae.decoder"),
        ("before", "(residual)"),
        ("before", "bert"),  # kept whole: the tuned bert after it has nothing inside
        ("before", "vae.decoder"),  # vae.decode, lined up with the child tuned in its place
    ]
