"""The region tree view's data: one run per side flattened in tree order and aligned by path (no server)."""

import pandas as pd
import pytest
from documents import profile

from aitune.viewer import tree
from aitune.viewer.sources import Loaded
from aitune.viewer.store import ProfileStore

BLOCKS = {"untuned_module:unet.blocks.0": [7.5] * 4, "untuned_module:unet.blocks.1": [5.0] * 4}  # 30 and 20 µs
EAGER_UNET = {"untuned_module:unet": (60.0, BLOCKS)}  # 10 µs of its own
TUNED_UNET = {"aot_module:unet": 25.0}
VAE = {"untuned_module:vae.decode": 30.0}


def test_the_median_run_is_an_actual_run_with_the_middle_time():
    doc = profile([{}] * 4, residual_us=[300.0, 100.0, 200.0, 400.0])

    assert tree.median_run(doc, "cpu") == 2


def test_a_run_flattens_depth_first_with_self_time_and_topmost_regions_stand_in_without_a_tree():
    doc = profile([{**EAGER_UNET, **VAE}])
    flat = {**doc, "runs": [{**doc["runs"][0], "tree": []}]}  # a capture of topmost regions only

    nodes = tree.run_nodes(doc, 0, "cpu")

    assert [(n.path, n.parent, n.total_us, n.self_us) for n in nodes] == [
        ("unet", None, 60.0, 10.0),
        ("unet.blocks.0", "unet", 30.0, 30.0),
        ("unet.blocks.1", "unet", 20.0, 20.0),
        ("vae.decode", None, 30.0, 30.0),
    ]
    assert [(n.path, n.total_us, n.self_us) for n in tree.run_nodes(flat, 0, "cpu")] == [
        ("unet", 60.0, 60.0),
        ("vae.decode", 30.0, 30.0),
    ]


def test_before_and_after_line_up_by_path_in_tree_order_with_gaps_where_a_side_lacks_a_node():
    sides = {
        "before": tree.run_nodes(profile([{**EAGER_UNET, **VAE}]), 0, "cpu"),
        "after": tree.run_nodes(profile([{**TUNED_UNET, **VAE}]), 0, "cpu"),
    }

    rows = tree.aligned_tree(sides)

    assert rows["region"].tolist() == [
        "unet",
        tree.INDENT + "unet.blocks.0",
        tree.INDENT + "unet.blocks.1",
        "vae.decode",
    ]
    times = rows[["before_total_us", "before_self_us", "after_total_us", "after_self_us"]]
    assert times.astype(object).where(times.notna(), None).values.tolist() == [
        [60.0, 10.0, 25.0, 25.0],
        [30.0, 30.0, None, None],
        [20.0, 20.0, None, None],
        [30.0, 30.0, 30.0, 30.0],
    ]
    assert rows["before_calls"].tolist()[1] == 4


def test_the_store_reads_each_sides_median_run_unless_a_run_is_chosen():
    before = profile([EAGER_UNET, VAE, {**EAGER_UNET, **VAE}], residual_us=[240.0, 70.0, 110.0])  # runs 300, 100, 200
    after = profile([TUNED_UNET, {**TUNED_UNET, **VAE}], residual_us=[35.0, 2.0])  # runs 60, 57
    store = ProfileStore(before=Loaded("before.json", before), after=Loaded("after.json", after))

    assert store.has_tree()
    assert store.tree_runs("cpu", None) == {"before": 2, "after": 1}
    assert store.tree_table("cpu", None)["path"].tolist() == ["unet", "unet.blocks.0", "unet.blocks.1", "vae.decode"]
    assert store.tree_table("cpu", 0)["path"].tolist() == ["unet", "unet.blocks.0", "unet.blocks.1"]


def test_a_profile_without_nested_regions_has_no_tree():
    flat = profile([{"untuned_module:unet": 60.0, **VAE}])

    assert not ProfileStore(before=Loaded("flat.json", flat)).has_tree()


@pytest.mark.parametrize("max_depth", [0, 1])
def test_the_tree_view_lists_levels_down_to_the_chosen_depth(max_depth):
    from aitune.viewer.selection import Selection
    from aitune.viewer.views import RegionTree

    store = ProfileStore(before=Loaded("before.json", profile([{**EAGER_UNET, **VAE}])))
    view = RegionTree(store=store, selection=Selection(), max_depth=max_depth)

    shown = view._render().objects[1].value

    assert isinstance(shown, pd.DataFrame)
    assert shown["region"].str.strip("\u00a0").tolist() == (
        ["unet", "vae.decode"] if max_depth == 0 else ["unet", "unet.blocks.0", "unet.blocks.1", "vae.decode"]
    )


def test_a_pairs_tree_lines_a_method_up_with_the_child_tuned_in_its_place():
    regions = [{"untuned_module:unet": 50.0, "untuned_module:vae.decode": 40.0}]
    before = profile(regions, methods={"untuned_module:vae.decode": "decode"})
    after = profile([{"untuned_module:unet": 50.0, "aot_module:vae.decoder": 12.0}])
    store = ProfileStore(before=Loaded("before.json", before), after=Loaded("after.json", after))

    table = store.tree_table("cpu", None)

    assert table[["path", "before_total_us", "after_total_us"]].values.tolist() == [
        ["unet", 50.0, 50.0],
        ["vae.decoder", 40.0, 12.0],
    ]
