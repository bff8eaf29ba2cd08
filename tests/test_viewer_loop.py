"""The viewer closes the loop: what to tune, what tuning gained, time per region, methods lined up (no server).

Real documents: the committed tune folder of the bundled example (`scripts/make_sample_traces.py`), and
captures of the example pipeline with and without an aitune wrapper around its decoder.
"""

import shutil
from pathlib import Path

import orjson
import pandas as pd
import pytest
from bokeh.models import HoverTool
from documents import HOSTILE, pipeline_doc

from aitune import compare
from aitune.compare.loop_report import read_loop_report
from aitune.compare.quality import TaskJudgment
from aitune.report import load
from aitune.suggest import suggest
from aitune.viewer import figures, overview, tables, targets, views
from aitune.viewer.app import build_page, open_initial
from aitune.viewer.selection import Selection
from aitune.viewer.sources import Loaded
from aitune.viewer.store import ProfileStore

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
TUNED = "tuned-pipeline"
BEFORE, AFTER = f"{TUNED}/before/profile.json", f"{TUNED}/after/profile.json"


def sample_store(*names: str, runs_dir: Path = SAMPLES) -> ProfileStore:
    store = ProfileStore(runs_dir=runs_dir)
    assert store.open_names(*names), store.problem
    return store


def rendered(view_class, store: ProfileStore) -> list:
    """Every pane and widget the view lays out for the store, flattened."""
    layout = view_class(store=store, selection=Selection())._render()
    return list(layout.select(lambda _: True))


def test_one_profile_suggests_what_to_tune_with_suggests_own_figures():
    store = sample_store(BEFORE)

    found = store.suggestions("cpu")

    assert store.suggested_side == "before"
    assert found == suggest(load(SAMPLES / BEFORE), domain="cpu")
    rows = tables.target_table(found)
    assert rows["path"].tolist() == [target.path for target in found.targets]
    assert rows["predicted_speedup"].tolist() == [target.predicted_speedup for target in found.targets]
    assert rows["share_low"].tolist() == [target.share_low for target in found.targets]
    tuned = rows.loc[rows["verdict"] == "tune", "path"].tolist()
    written = orjson.loads((SAMPLES / TUNED / "suggestions.json").read_bytes())
    assert tuned == [target.path for target in found.recommended()] == written["recommended"]


def test_a_pair_suggests_what_to_tune_next_in_its_after_profile():
    store = sample_store(BEFORE, AFTER)

    found = store.suggestions("cpu")

    assert store.suggested_side == "after"
    assert found == suggest(load(SAMPLES / AFTER), domain="cpu")
    verdicts = dict(zip(*tables.target_table(found)[["path", "verdict"]].T.values, strict=True))
    written = orjson.loads((SAMPLES / TUNED / "compare.json").read_bytes())["tuned_regions"]
    tuned = [gain["path"] for gain in written if gain["tuned"]]
    assert tuned and all(verdicts[path] == "ALREADY_TUNED" for path in tuned)  # the wrappers the loop left in place


def test_the_suggestions_tab_lays_out_the_targets_the_picked_ones_and_every_reason():
    store = sample_store(BEFORE)
    found = store.suggestions("cpu")

    parts = rendered(targets.TuningTargets, store)

    grids = {tuple(part.css_classes): part for part in parts if hasattr(part, "value") and hasattr(part, "formatters")}
    assert grids[("target-table",)].value.equals(tables.target_table(found))
    reasons = grids[("reason-table",)].value
    assert len(reasons) == sum(len(target.reasons) for target in found.targets)
    assert grids[("reason-table",)].formatters["message"] == views.WRAPPED_TEXT
    picked = [part.object for part in parts if "suggest-picked" in getattr(part, "object", "")]
    assert picked == [targets.text_block(targets.picked_line(found), "aitune-text suggest-picked").object]
    assert targets.picked_line(found).startswith("Tune, best first: unet (")


def test_suggestion_text_from_a_stranger_reaches_the_page_as_text():
    doc = pipeline_doc(65.0, extra_region=f"untuned_module:{HOSTILE}")
    store = ProfileStore(before=Loaded(HOSTILE, doc))

    parts = rendered(targets.TuningTargets, store)

    html = [part.object for part in parts if isinstance(part, views.pn.pane.HTML)]
    assert html and not any("<script>" in text for text in html)
    grid = next(part for part in parts if "advice-table" in part.css_classes)  # not a module path: advice
    assert any(message.startswith(HOSTILE) for message in grid.value["message"])
    assert grid.formatters["message"] == views.WRAPPED_TEXT


def test_a_pair_from_a_tune_folder_shows_the_gains_of_its_compare_report():
    store = sample_store(BEFORE, AFTER)

    report = store.tune_report()

    written = orjson.loads((SAMPLES / TUNED / "compare.json").read_bytes())
    assert report == read_loop_report(written, "compare.json")
    rows = tables.gain_table(report)
    assert rows[["path", "winner"]].values.tolist() == [[g["path"], g["winner"]] for g in written["tuned_regions"]]
    for row, gain, read in zip(rows.itertuples(), written["tuned_regions"], report.regions, strict=True):
        shown = gain["realised_speedup"] if gain["tuned"] else None  # a region kept as it was: noise, not a gain
        assert (None if pd.isna(row.realised_speedup) else row.realised_speedup) == shown
        assert row.note == read.note  # the gain's own words: a verified region's check, else why it stayed
    assert all(gain["check"]["kept"] for gain in written["tuned_regions"])  # the showcase's regions passed the check
    assert [row.note.split(":")[0] for row in rows.itertuples()] == ["kept"] * len(rows)
    assert report.end_to_end.shown() in overview.tuned_line(report)


def test_the_tuned_regions_view_shows_the_speedup_line_and_the_gain_table():
    store = sample_store(BEFORE, AFTER)

    parts = rendered(overview.TunedRegions, store)

    grid = next(part for part in parts if "gain-table" in getattr(part, "css_classes", []))
    assert grid.value.equals(tables.gain_table(store.tune_report()))
    assert any("Tuned by aitune-profile tune:" in getattr(part, "object", "") for part in parts)


@pytest.mark.parametrize(
    "names", [(BEFORE, "scenarios-batch.profile.json"), (BEFORE,), (AFTER, BEFORE)], ids=["other", "one", "swapped"]
)
def test_a_pair_not_from_one_tune_folder_has_no_tune_report(names):
    store = sample_store(*names)

    assert store.tune_report() is None
    assert rendered(overview.TunedRegions, store)[0].height == 0


def test_uploads_have_no_tune_report_even_under_a_tune_folders_names():
    store = ProfileStore(runs_dir=SAMPLES)
    store.open_uploads({name: (SAMPLES / name).read_bytes() for name in (BEFORE, AFTER)})

    assert store.is_pair and store.tune_report() is None


def test_a_broken_compare_report_is_one_sentence_and_the_pair_still_shows(tmp_path):
    shutil.copytree(SAMPLES / TUNED, tmp_path / TUNED)
    (tmp_path / TUNED / "compare.json").write_text('{"domain": "cpu", "speedup": {}, "tuned_regions": [3]}')
    store = sample_store(BEFORE, AFTER, runs_dir=tmp_path)

    assert store.tune_report() is None

    assert store.problem == (
        "tuned-pipeline/compare.json: tuned_regions[0]: 3 is not of type 'object'; write the folder again with "
        "`aitune-profile tune`."
    )
    assert sorted(set(store.region_table("cpu")["side"])) == ["after", "before"]


def test_a_pairs_region_chart_draws_time_per_run_and_gives_the_share_on_hover():
    store = sample_store(BEFORE, AFTER)
    regions = store.region_table("cpu")

    plot = figures.region_bars(regions, "cpu", "time")

    bars = plot.renderers[0]
    assert bars.glyph.right == "ms"
    assert bars.data_source.data["ms"] == (regions["time_us"] / 1000).tolist()
    tooltips = dict(next(tool for tool in plot.tools if isinstance(tool, HoverTool)).tooltips)
    assert tooltips["share"] == "@percent{0.0}%"
    assert plot.title.text.startswith("Time per region")


def test_the_region_view_draws_a_pair_in_time_and_one_profile_in_shares():
    pair, one = sample_store(BEFORE, AFTER), sample_store(BEFORE)

    drawn = {
        name: next(part.object for part in rendered(views.RegionShares, store) if isinstance(part, views.pn.pane.Bokeh))
        for name, store in (("pair", pair), ("one", one))
    }

    assert drawn["pair"].renderers[0].glyph.right == "ms"
    assert drawn["one"].renderers[0].glyph.right == "percent"


@pytest.fixture(scope="module")
def wrapped_vae_pair():
    """Real captures of the example pipeline: eager, then with ``vae`` in an aitune wrapper (passthrough)."""
    pytest.importorskip("torch")
    import pipeline_app

    import aitune.torch as ait

    pipe = pipeline_app.Pipeline()

    def capture():
        return ait.profile(pipe, pipeline_app.input_data, pipe, warmup_runs=0, measured_runs=2, obj_name="pipe").data

    before = capture()
    ait.wrap(pipe, ["vae"])["vae"].enable_passthrough()
    try:
        after = capture()
    finally:
        ait.unwrap(pipe, ["vae"])
    return before, after


def test_a_method_region_lines_up_with_the_wrapper_that_replaced_it_in_the_chart_and_the_movers(wrapped_vae_pair):
    before, after = wrapped_vae_pair
    store = ProfileStore(before=Loaded("before.json", before), after=Loaded("after.json", after))

    regions = store.region_table("cpu")
    lines = overview.movers(store.compare_now("cpu"), limit=10)

    vae = regions[regions["path"] == "vae"]
    assert vae[["side", "region_id", "kind"]].values.tolist() == [
        ["before", "untuned_module:vae.decode", "untuned"],
        ["after", "aot_module:vae", "managed"],
    ]
    assert "vae.decode" not in regions["path"].tolist()
    movers = [line.split(":")[0] for line in lines]
    # Whether the headline looks through unet (≥ 90% of the run) is up to its measured share: the rule
    # under test is that every mover, vae included, is one pair, never a removed and an added row.
    assert "vae (both)" in movers and "text_encoder (both)" in movers
    assert all(mover.endswith("(both)") for mover in movers)


def test_the_chart_groups_by_compares_own_headline_paths():
    before, after = load(SAMPLES / BEFORE), load(SAMPLES / AFTER)
    store = sample_store(BEFORE, AFTER)

    regions = store.region_table("cpu")

    old, new = compare.headline_paths(before, after)
    paths = {"before": old, "after": new}
    for side, label, path in regions[["side", "region_id", "path"]].itertuples(index=False):
        assert path == paths[side].get(label, tables.RESIDUAL)


def test_the_page_opens_the_tune_folders_pair_by_default_with_a_suggestions_tab():
    store = ProfileStore(runs_dir=SAMPLES)

    open_initial(store, {})
    page = build_page(SAMPLES, {})

    assert (store.before.name, store.after.name) == (BEFORE, AFTER)
    tabs = next(item for item in page.select(views.pn.Tabs))
    assert tabs._names[:2] == ["Regions", "Suggestions"]


def gated_store(tmp_path: Path, gate: TaskJudgment | dict) -> tuple[ProfileStore, list[str]]:
    """The showcase's tune folder with a task gate's verdict on its first tuned region written into compare.json."""
    shutil.copytree(SAMPLES / TUNED, tmp_path / TUNED)
    written = orjson.loads((tmp_path / TUNED / "compare.json").read_bytes())
    paths = [gain["path"] for gain in written["tuned_regions"]]
    verdict = gate.to_dict() if isinstance(gate, TaskJudgment) else gate
    gated = {**written, "precision": verdict["precision"], "task_gate": {**verdict, "regions": paths[:1]}}
    (tmp_path / TUNED / "compare.json").write_bytes(orjson.dumps(gated))
    return sample_store(BEFORE, AFTER, runs_dir=tmp_path), paths


@pytest.mark.parametrize(
    ("gate", "shown"),
    [
        (
            TaskJudgment("int8", "top1_agreement", 0.99, 0.9375, (), 2),
            "int8: top-1 agreement 0.94 < 0.99 over 2 inputs, refused",
        ),
        (TaskJudgment("bf16", "token_agreement", 0.95, 1.0, ()), "bf16: token agreement 1.00 ≥ 0.95"),
        (TaskJudgment("int8", "top1_agreement", 0.99, 0.9896, ()), "int8: top-1 agreement 0.9896 < 0.9900, refused"),
        (TaskJudgment("bf16", "psnr_db", 30.0, 31.25, ()), "bf16: PSNR 31.25 ≥ 30.00 dB"),
    ],
    ids=["int8-refused", "bf16-passed", "close-to-the-bar", "psnr"],
)
def test_a_tune_folder_at_a_reduced_precision_shows_the_task_gates_verdict_per_region(tmp_path, gate, shown):
    store, paths = gated_store(tmp_path, gate)

    parts = rendered(overview.TunedRegions, store)

    rows = tables.gain_table(store.tune_report())
    assert rows["task_gate"].tolist() == [shown] + ["-"] * (len(paths) - 1)  # the regions it did not judge: none
    grid = next(part for part in parts if "gain-table" in getattr(part, "css_classes", []))
    assert grid.value["task_gate"].tolist() == rows["task_gate"].tolist()


def test_a_tune_folder_at_fp32_has_no_task_gate_column():
    rows = tables.gain_table(sample_store(BEFORE, AFTER).tune_report())

    assert "task_gate" not in rows.columns


def test_a_task_gates_problem_from_a_stranger_reaches_the_table_as_text(tmp_path):
    gate = TaskJudgment("int8", "cosine", 0.99, None, (), problem="<b>bold</b>\x1b[31m red\u202e")
    store, _ = gated_store(tmp_path, gate)

    parts = rendered(overview.TunedRegions, store)

    grid = next(part for part in parts if "gain-table" in getattr(part, "css_classes", []))
    cell = grid.value["task_gate"].iloc[0]
    assert cell == "int8: cosine -, not judged: <b>bold</b>\\x1b[31m red\\u202e"  # controls and bidi spelled out
    assert grid.formatters["task_gate"] == views.WRAPPED_TEXT  # a textarea: the browser shows tags as text


def test_a_compare_report_whose_task_gate_is_not_a_verdict_is_one_sentence(tmp_path):
    store, _ = gated_store(tmp_path, {"precision": "int8", "metric": "accuracy", "minimum": 0.99, "value": 1.0})

    assert store.tune_report() is None
    assert store.problem.startswith(
        "tuned-pipeline/compare.json: task_gate.metric: 'accuracy' is not one of 'top1_agreement', "
    )
