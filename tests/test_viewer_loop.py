"""The viewer closes the loop: what to tune in one profile, and next in a pair's after side (no server).

Real documents: the committed tune folder of the bundled example (`scripts/make_sample_traces.py`).
"""

from pathlib import Path

from viewer_docs import HOSTILE, pipeline_doc

from aitune.report import load
from aitune.suggest import suggest
from aitune.viewer import tables, targets, views
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
    assert tuned == [target.path for target in found.recommended()] == ["unet", "vae"]


def test_a_pair_suggests_what_to_tune_next_in_its_after_profile():
    store = sample_store(BEFORE, AFTER)

    found = store.suggestions("cpu")

    assert store.suggested_side == "after"
    assert found == suggest(load(SAMPLES / AFTER), domain="cpu")
    verdicts = dict(zip(*tables.target_table(found)[["path", "verdict"]].T.values, strict=True))
    assert verdicts["vae"] == "ALREADY_TUNED"  # the wrapper the loop left in place


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
    grid = next(part for part in parts if "target-table" in part.css_classes)
    assert HOSTILE in grid.value["path"].tolist()
    assert grid.formatters["path"] == views.PLAIN_TEXT


def test_the_page_opens_the_tune_folders_pair_by_default_with_a_suggestions_tab():
    store = ProfileStore(runs_dir=SAMPLES)

    open_initial(store, {})
    page = build_page(SAMPLES, {})

    assert (store.before.name, store.after.name) == (BEFORE, AFTER)
    tabs = next(item for item in page.select(views.pn.Tabs))
    assert tabs._names[:2] == ["Regions", "Suggestions"]
