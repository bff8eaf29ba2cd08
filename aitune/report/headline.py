"""The headline: the rows a summary shows first, at the level of the region tree where a run's time splits.

When regions span the whole run (the document's ``spanning_regions``, e.g. a root entry method
such as ``generate``), ``runs[i].regions`` already lists the level below them, and their self time
(sampling, cache handling) is part of the residual there, as AITune's readers expect. The headline
names that self time in a row of its own, ``untuned_module:generate (self)``, so that its residual
row is the time outside every region. Every summary (terminal, Markdown, viewer, compare's top
movers) reads these rows; none decides the level for itself.

Invariant: per run and domain, the rows' times add up to the run's time, as the regions and the
residual of ``runs[i]`` do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aitune.analysis.attribution import fraction
from aitune.analysis.statistics import median_share
from aitune.markers import region_path

RESIDUAL_LABEL = "(residual)"
SELF_SUFFIX = " (self)"


@dataclass(frozen=True)
class HeadlineRow:
    """One row of the headline with its value in every measured run (0 in a run where it did not run)."""

    label: str  # what a table shows: the region id, "<region id> (self)" or "(residual)"
    path: str  # what compare lines rows up by: the region's path, "<path> (self)" or "(residual)"
    role: str  # "region", "self" (a spanning region's own time) or "residual"
    region_id: str | None  # the region (for a self row, the spanning one); None for the residual
    calls: list[int]
    times_us: list[float]
    fractions: list[float]  # of each run's time in the domain

    @property
    def share(self) -> float:
        """Its share of the run, as every reader shows it (`aitune.analysis.statistics.median_share`)."""
        return median_share(self.fractions)


def headline_rows(doc: Mapping[str, Any], domain: str = "cpu") -> list[HeadlineRow]:
    """The regions of ``runs[i].regions`` (document order), one self row per spanning region, then the residual."""
    runs = doc["runs"]
    key = f"{domain}_time_us"
    totals = [run["timing"].get(key, 0.0) for run in runs]

    def row(
        label: str, path: str, role: str, region: str | None, nodes: Sequence[Mapping[str, Any]], time_key: str
    ) -> HeadlineRow:
        times = [node.get(time_key, 0.0) for node in nodes]
        calls = [node.get("calls", 0) for node in nodes]
        fractions = [fraction(time, total) for time, total in zip(times, totals, strict=True)]
        return HeadlineRow(label, path, role, region, calls, times, fractions)

    by_run = [{share["region_id"]: share for share in run["regions"]} for run in runs]
    rows = [
        row(region, region_path(region), "region", region, [shares.get(region, {}) for shares in by_run], key)
        for region in dict.fromkeys(region for shares in by_run for region in shares)
    ]
    spanning = doc.get("spanning_regions", [])
    chains = [_spanning_nodes(run, spanning) for run in runs]
    for depth, region in enumerate(spanning):
        nodes = [chain[depth] if depth < len(chain) else {} for chain in chains]
        path = region_path(region) + SELF_SUFFIX
        rows.append(row(region + SELF_SUFFIX, path, "self", region, nodes, f"{domain}_self_time_us"))
    named = [sum(item.times_us[index] for item in rows if item.role == "self") for index in range(len(runs))]
    outside = [{key: max(0.0, run["residual"].get(key, 0.0) - part)} for run, part in zip(runs, named, strict=True)]
    rows.append(row(RESIDUAL_LABEL, RESIDUAL_LABEL, "residual", None, outside, key))
    return rows


def _spanning_nodes(run: Mapping[str, Any], spanning: Sequence[str]) -> list[Mapping[str, Any]]:
    """The tree nodes of the spanning chain in one run, outermost first (fewer if the tree lacks them)."""
    nodes: list[Mapping[str, Any]] = []
    level = run.get("tree", [])
    for region in spanning:
        node = next((candidate for candidate in level if candidate["region_id"] == region), None)
        if node is None:
            break
        nodes.append(node)
        level = node["children"]
    return nodes
