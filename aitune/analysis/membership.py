"""Run and region membership, found once when the events model is built (`aitune.analysis.events`): the run
and the innermost region each operator, launch and region span started in, and every run's region tree.

A point belongs to the innermost span of one thread that holds it, ends included
(`aitune.analysis.intervals.enclosing_array`): an operator or a launch by its start, a region span by
its start too, so a region entered in a run belongs to that run. Regions nest among themselves
(`aitune.analysis.intervals.parent_array`), and the region tree is folded once from that nesting
(`region_tree`): a region span in a run is a node below its enclosing region's node, or a topmost node
of its run when no enclosing region is in a run. Analyses read these columns
(`aitune.analysis.events.ThreadView`) and never search runs or regions by time again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from aitune.analysis.intervals import Columns, enclosing_array, order_array, parent_array
from aitune.analysis.span import Span
from aitune.markers import span_run_index

MAX_REGION_DEPTH = 24
"""Deepest nesting of region spans read from a trace: a model's modules nest about 6 deep (``unet``,
``down_blocks.0``, ``attentions.0``, ``transformer_blocks.0``, ``attn1``, ``to_q``), 8 under a pipeline and
an entry method. Each level is two levels of JSON in the profile's region tree, so every profile made
stays well inside the readers' JSON depth (`aitune.report.io.MAX_JSON_DEPTH`, the viewer's 64), and a
hostile trace nesting its annotations hundreds deep is one sentence, not a recursion error. A region
span deeper than this has no tree node (`aitune.analysis.attribution` refuses such a trace)."""

TreeEntry = tuple[int, tuple[str, ...]]
"""A node of a run's region tree as the model holds it: (position of the run in the model's runs, region ids
from the topmost region down to the node)."""

NodeKey = tuple[int, tuple[str, ...]]
"""A node of a run's region tree as the analyses name it: (run index, region ids from the topmost region down)."""


class ThreadMembership(NamedTuple):
    """One thread's membership columns, index arrays (-1: none). Runs, regions and operators are numbered
    by their position in the thread's view; region spans are given in trace order."""

    op_runs: np.ndarray  # the run each operator started in
    op_regions: np.ndarray  # the innermost region span each operator started in
    launch_runs: np.ndarray  # the run each launch started in
    launch_regions: np.ndarray  # the innermost region span each launch started in
    launch_ops: np.ndarray  # the innermost operator each launch started in
    region_runs: np.ndarray  # the run each region span started in
    region_order: np.ndarray  # the region spans, every parent before its children
    region_parents: np.ndarray  # the innermost region span enclosing each one
    region_depths: np.ndarray  # 1 for a topmost region span, 2 for one inside it, …


def thread_membership(
    runs: Columns, regions: Columns, ops: Columns, op_order: np.ndarray, launch_starts: Sequence[float]
) -> ThreadMembership:
    """The membership columns of one thread's ``runs``, ``regions`` and operators (``ops``, nested in
    ``op_order``) and of the launches starting at ``launch_starts``."""
    run_order = order_array(*runs)
    region_order = order_array(*regions)
    region_parents = parent_array(*regions, order=region_order)
    return ThreadMembership(
        op_runs=enclosing_array(runs, ops[0], run_order),
        op_regions=enclosing_array(regions, ops[0], region_order),
        launch_runs=enclosing_array(runs, launch_starts, run_order),
        launch_regions=enclosing_array(regions, launch_starts, region_order),
        launch_ops=enclosing_array(ops, launch_starts, op_order),
        region_runs=enclosing_array(runs, regions[0], run_order),
        region_order=region_order,
        region_parents=region_parents,
        region_depths=_depths(region_order, region_parents),
    )


def _depths(order: np.ndarray, parents: np.ndarray) -> np.ndarray:
    """How deep each span nests (1: topmost), from its parent's depth, parents first.

    >>> _depths(np.array([0, 1, 2]), np.array([-1, 0, 1])).tolist()
    [1, 2, 3]
    """
    depths = [0] * len(order)
    parent_of = parents.tolist()
    for index in order.tolist():
        parent = parent_of[index]
        depths[index] = 1 if parent < 0 else depths[parent] + 1
    return np.array(depths, dtype=np.intp)


def region_tree(
    threads: Sequence[tuple[Sequence[int], Sequence[str], ThreadMembership]],
) -> tuple[list[TreeEntry], list[np.ndarray]]:
    """The nodes of every run's region tree, in the order the fold enters them (thread by thread, parents
    first), and for each thread the node of each of its region spans (-1: outside every run, or deeper
    than `MAX_REGION_DEPTH`).

    ``threads`` gives, per thread, the model's run position of each of its runs, its region spans' ids and
    its `ThreadMembership`. A region span in a run sits below its enclosing region's node, or is a topmost
    node of its own run when its enclosing region has no node; every span of one region at one place in
    one run's tree is one node, whatever the thread.
    """
    ids: dict[TreeEntry, int] = {}
    found = []
    for run_positions, region_ids, members in threads:
        node_of = [-1] * len(region_ids)
        parent_of, run_of, depth_of = (
            column.tolist() for column in (members.region_parents, members.region_runs, members.region_depths)
        )
        entries = list(ids)
        for index in members.region_order.tolist():  # parents first
            run = run_of[index]
            if run < 0 or depth_of[index] > MAX_REGION_DEPTH:
                continue
            parent = parent_of[index]
            above = node_of[parent] if parent >= 0 else -1
            if above < 0:
                entry: TreeEntry = (run_positions[run], (region_ids[index],))
            else:
                top_run, path = entries[above]
                entry = (top_run, (*path, region_ids[index]))
            node = ids.get(entry)
            if node is None:
                node = ids[entry] = len(entries)
                entries.append(entry)
            node_of[index] = node
        found.append(np.array(node_of, dtype=np.intp))
    return list(ids), found


def nodes_at(region_nodes: np.ndarray, regions: np.ndarray) -> np.ndarray:
    """The tree node (``region_nodes``, a thread's) of each region span in ``regions``, -1 where that is -1.

    >>> nodes_at(np.array([4, -1, 5]), np.array([2, -1, 0, 1])).tolist()
    [5, -1, 4, -1]
    """
    return np.where(regions >= 0, region_nodes[np.maximum(regions, 0)], -1)


def node_keys(runs: Sequence[Span], tree: Sequence[TreeEntry]) -> list[NodeKey]:
    """The `NodeKey` of each node of a model's region ``tree`` (``events.region_tree``), in its order."""
    return [(span_run_index(runs[run].name), path) for run, path in tree]
