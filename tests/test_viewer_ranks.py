"""A merged profile in the viewer: the Ranks tab's per-rank chart, rank table and rank picker (no server)."""

import panel as pn
import pytest
from documents import pipeline_doc
from ranks import merged

from aitune.viewer import tables, views
from aitune.viewer.selection import Selection
from aitune.viewer.sources import Loaded
from aitune.viewer.store import ProfileStore

UNET = "untuned_module:unet"


@pytest.fixture(scope="module")
def merged_doc():
    """Two ranks of the 3-region pipeline; rank 1's unet takes 200 µs against rank 0's 65."""
    return merged([pipeline_doc(65.0), pipeline_doc(200.0)])


def ranks_view(doc, **choices) -> views.Ranks:
    return views.Ranks(store=ProfileStore(before=Loaded("merged.json", doc)), selection=Selection(**choices))


def parts(view: views.Ranks) -> list:
    return view._render().objects


def test_the_store_lists_each_rank_with_the_region_that_makes_it_slow(merged_doc):
    store = ProfileStore(before=Loaded("merged.json", merged_doc))

    ranks = store.rank_table()

    assert store.has_ranks()
    assert ranks["rank"].tolist() == [0, 1]
    assert ranks["straggler_region"].isna().tolist() == [True, False]
    assert ranks["straggler_region"].iloc[1] == UNET
    assert ranks["median_us"].tolist() == merged_doc["ranks"]["run_time"]["median_us"]


def test_the_per_rank_table_has_the_run_time_first_then_each_region_by_rank(merged_doc):
    rows = tables.rank_region_table(merged_doc)

    unet = rows[rows["region_id"] == UNET]
    assert rows["region_id"].iloc[0] == tables.RUN_TIME
    assert unet["median_us"].tolist() == [65.0, 200.0]
    assert set(unet["slowest_rank"]) == {1}


def test_the_ranks_tab_charts_the_chosen_quantity_per_rank_and_lists_the_ranks(merged_doc):
    shown = parts(ranks_view(merged_doc, rank_quantity=UNET))

    chart = next(part.object for part in shown if isinstance(part, pn.pane.Bokeh))
    listed = next(part for part in shown if isinstance(part, pn.widgets.Tabulator))
    assert chart.name == "rank-bars" and UNET in chart.title.text
    assert list(chart.renderers[0].data_source.data["ms"]) == [0.065, 0.2]
    assert "rank-table" in listed.css_classes and len(listed.value) == 2


def test_picking_a_rank_lists_that_ranks_regions(merged_doc):
    view = ranks_view(merged_doc)
    picker = view._pickers().objects[0]

    picker.value = "rank 1"
    listed = next(part for part in parts(view) if isinstance(part, pn.widgets.Tabulator))

    assert view.selection.rank == 1
    assert "rank-region-table" in listed.css_classes
    assert set(listed.value["rank"]) == {1}
    assert listed.value.set_index("region_id").loc[UNET, "median_us"] == 200.0


def test_a_single_capture_has_no_ranks_to_show():
    shown = ranks_view(pipeline_doc(65.0))._render()

    assert "Not a merged profile" in shown.object
