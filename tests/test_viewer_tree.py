"""The region tree view's data: one run per side flattened in tree order and aligned by path (no server)."""

import pandas as pd
import pytest

from aitune.viewer import tree
from aitune.viewer.sources import Loaded
from aitune.viewer.store import ProfileStore


def node(region_id, total_us, self_us, *children, calls=1):
    return {
        "region_id": region_id,
        "calls": calls,
        "cpu_time_us": total_us,
        "cpu_self_time_us": self_us,
        "cpu_time_fraction": total_us / 100,
        "children": list(children),
    }


def doc(*runs):
    """A document of ``runs``: each a (cpu run time µs, tree) pair."""
    return {
        "runs": [
            {
                "run_index": index,
                "timing": {"cpu_time_us": run_us},
                "regions": [{k: v for k, v in n.items() if "self" not in k and k != "children"} for n in nodes],
                "residual": {"cpu_time_us": 0.0},
                "tree": nodes,
            }
            for index, (run_us, nodes) in enumerate(runs)
        ]
    }


EAGER_UNET = node(
    "untuned_module:unet",
    60.0,
    10.0,
    node("untuned_module:unet.blocks.0", 30.0, 30.0, calls=4),
    node("untuned_module:unet.blocks.1", 20.0, 20.0, calls=4),
)
TUNED_UNET = node("aot_module:unet", 25.0, 25.0)
VAE = node("untuned_module:vae.decode", 30.0, 30.0)


def test_the_median_run_is_an_actual_run_with_the_middle_time():
    profile = doc((300.0, []), (100.0, []), (200.0, []), (400.0, []))

    assert tree.median_run(profile, "cpu") == 2


def test_a_run_flattens_depth_first_with_self_time_and_topmost_regions_stand_in_without_a_tree():
    profile = doc((100.0, [EAGER_UNET, VAE]))
    flat = {**profile, "runs": [{**profile["runs"][0], "tree": []}]}

    nodes = tree.run_nodes(profile, 0, "cpu")

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
        "before": tree.run_nodes(doc((100.0, [EAGER_UNET, VAE])), 0, "cpu"),
        "after": tree.run_nodes(doc((60.0, [TUNED_UNET, VAE])), 0, "cpu"),
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
    before = doc((300.0, [EAGER_UNET]), (100.0, [VAE]), (200.0, [EAGER_UNET, VAE]))
    after = doc((60.0, [TUNED_UNET]), (50.0, [TUNED_UNET, VAE]))
    store = ProfileStore(before=Loaded("before.json", before), after=Loaded("after.json", after))

    assert store.has_tree()
    assert store.tree_runs("cpu", None) == {"before": 2, "after": 1}
    assert store.tree_table("cpu", None)["path"].tolist() == ["unet", "unet.blocks.0", "unet.blocks.1", "vae.decode"]
    assert store.tree_table("cpu", 0)["path"].tolist() == ["unet", "unet.blocks.0", "unet.blocks.1"]


def test_a_profile_without_nested_regions_has_no_tree():
    profile = doc((100.0, []))

    assert not ProfileStore(before=Loaded("flat.json", profile)).has_tree()


@pytest.mark.parametrize("max_depth", [0, 1])
def test_the_tree_view_lists_levels_down_to_the_chosen_depth(max_depth):
    from aitune.viewer.selection import Selection
    from aitune.viewer.views import RegionTree

    store = ProfileStore(before=Loaded("before.json", doc((100.0, [EAGER_UNET, VAE]))))
    view = RegionTree(store=store, selection=Selection(), max_depth=max_depth)

    shown = view._render().objects[1].value

    assert isinstance(shown, pd.DataFrame)
    assert shown["region"].str.strip("\u00a0").tolist() == (
        ["unet", "vae.decode"] if max_depth == 0 else ["unet", "unet.blocks.0", "unet.blocks.1", "vae.decode"]
    )


def test_a_pairs_tree_lines_a_method_up_with_the_child_tuned_in_its_place():
    before = doc((100.0, [node("untuned_module:unet", 50.0, 50.0), node("untuned_module:vae.decode", 40.0, 40.0)]))
    before["regions"] = [{"id": "untuned_module:vae.decode", "name": "vae.decode", "method": "decode"}]
    after = doc((70.0, [node("untuned_module:unet", 50.0, 50.0), node("aot_module:vae.decoder", 12.0, 12.0)]))
    store = ProfileStore(before=Loaded("before.json", before), after=Loaded("after.json", after))

    table = store.tree_table("cpu", None)

    assert table[["path", "before_total_us", "after_total_us"]].values.tolist() == [
        ["unet", 50.0, 50.0],
        ["vae.decoder", 40.0, 12.0],
    ]
