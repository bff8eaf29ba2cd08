"""The region tree of one run per side, flattened into rows and aligned by path: pure functions of documents.

Each side shows one actual run (the chosen one, or its median run) rather than medians per node, so
a node's children and self time still add up to its total.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from aitune import compare
from aitune.markers import region_path
from aitune.report import samples
from aitune.report.model import ProfileLike, RegionShare, TreeNode, as_profile, given, self_time_in, time_in
from aitune.report.samples import DOMAINS, region_samples
from aitune.viewer.tables import Column

INDENT = "\u00a0\u00a0\u00a0"  # non-breaking spaces: table cells collapse ordinary ones
NODE_COLUMNS = [Column.CALLS, Column.TOTAL_US, Column.SELF_US]
"""Per side, a node's figures (`Node`'s fields), each a column ``<side>_<figure>`` of the aligned tree."""


@dataclass(frozen=True)
class Node:
    """One region entered during a run, flattened: where it sits and its times in one domain (µs)."""

    path: str
    parent: str | None
    calls: int
    total_us: float
    self_us: float


def median_run(doc: ProfileLike, domain: str) -> int:
    """The index of the run whose ``domain`` time is the median (`aitune.report.samples.median_run`)."""
    return samples.median_run(as_profile(doc).runs, domain).run_index


def has_tree(doc: ProfileLike) -> bool:
    """Whether any run of the document holds nested regions."""
    return any(given(run.tree, []) for run in as_profile(doc).runs)


def run_nodes(doc: ProfileLike, run_index: int, domain: str) -> list[Node]:
    """The nodes of one run's tree in depth-first order; its topmost regions (self = total) without a tree."""
    run = next((run for run in as_profile(doc).runs if run.run_index == run_index), None)
    return [] if run is None else list(_flatten(run.top_nodes(), domain, None))


def _flatten(shares: Iterable[RegionShare | TreeNode], domain: str, parent: str | None) -> Iterable[Node]:
    for share in shares:
        path = region_path(share.region_id)
        total = time_in(share, domain) or 0.0
        tree_node = isinstance(share, TreeNode)
        own = self_time_in(share, domain) if tree_node else None
        yield Node(path, parent, share.calls, total, total if own is None else own)
        yield from _flatten(share.children if tree_node else (), domain, path)


def lined_up_nodes(before: ProfileLike, after: ProfileLike, sides: Mapping[str, list[Node]]) -> dict[str, list[Node]]:
    """A pair's nodes under the paths `aitune.compare.lined_up` gives their regions (the one pairing rule):
    a side's root stripped, and ``vae.decode`` under the child tuned in its place (``vae.decoder``)."""
    paired = compare.lined_up(before, after, region_samples, DOMAINS[0])
    renames = [{region_path(region): path for path, (region, _) in samples.items()} for samples in paired]
    return {
        side: [
            replace(node, path=rename.get(node.path, node.path), parent=rename.get(node.parent, node.parent))
            for node in nodes
        ]
        for (side, nodes), rename in zip(sides.items(), renames, strict=True)
    }


def aligned_tree(sides: Mapping[str, list[Node]]) -> pd.DataFrame:
    """One row per path of any side, in tree order (a path sits where it first appears), side columns beside.

    Columns: ``region`` (the path indented by depth), ``path``, ``depth``, then per side
    ``<side>_calls``, ``<side>_total_us`` and ``<side>_self_us`` (empty where the side lacks the path).
    """
    children: dict[str | None, list[str]] = {}
    placed: dict[str, Node] = {}
    for nodes in sides.values():
        for node in nodes:
            if node.path not in placed:
                placed[node.path] = node
                children.setdefault(node.parent if node.parent in placed else None, []).append(node.path)
    by_side = {side: {node.path: node for node in nodes} for side, nodes in sides.items()}
    rows = []
    for path, depth in _preorder(children, None, 0):
        row: dict[str, Any] = {Column.REGION: INDENT * depth + path, Column.PATH: path, Column.DEPTH: depth}
        for side, nodes in by_side.items():
            node = nodes.get(path)
            row.update({f"{side}_{column}": getattr(node, column) if node else None for column in NODE_COLUMNS})
        rows.append(row)
    columns = [
        Column.REGION,
        Column.PATH,
        Column.DEPTH,
        *(f"{side}_{column}" for side in sides for column in NODE_COLUMNS),
    ]
    return pd.DataFrame(rows, columns=columns)


def _preorder(children: Mapping[str | None, list[str]], parent: str | None, depth: int) -> Iterable[tuple[str, int]]:
    for path in children.get(parent, []):
        yield path, depth
        yield from _preorder(children, path, depth + 1)
