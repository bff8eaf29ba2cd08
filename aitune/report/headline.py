"""The headline: the rows a summary shows first, at the level of the region tree where a run's time splits.

When regions span the whole run (the document's ``spanning_regions``, e.g. a root entry method
such as ``generate``), ``runs[i].regions`` already lists the level below them, and their self time
(sampling, cache handling) is part of the residual there, as AITune's readers expect. The headline
names that self time in a row of its own, ``untuned_module:generate (self)``, so that its residual
row is the time outside every region.

The headline then looks through any region that holds at least `LOOK_THROUGH_SHARE` of the run
even when siblings share the rest (`looks_through`): timm's ``forward_features`` at 99.5% beside
``forward_head``, or a BERT classifier's ``bert`` beside ``classifier``, show as their children and
their own self row, while the siblings stay. The check repeats one level down. Every summary
(terminal, Markdown, viewer, compare's top movers, suggest) reads these rows; none decides the
level for itself.

Invariant: per run and domain, the rows' times add up to the run's time, as the regions and the
residual of ``runs[i]`` do.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from aitune.analysis.shares import SPANS_RUN_FRACTION, fraction, median_share
from aitune.markers import region_path
from aitune.report.memo import derived
from aitune.report.model import (
    Cause,
    Phase,
    PhaseRegion,
    Profile,
    ProfileLike,
    RegionShare,
    Run,
    TimedRecord,
    TreeNode,
    as_profile,
    given,
    self_time_in,
    time_in,
)

RESIDUAL_LABEL = "(residual)"
SELF_SUFFIX = " (self)"
LOOK_THROUGH_SHARE = SPANS_RUN_FRACTION
"""A region holding at least this median share of the run's CPU time is shown as its parts: the
same figure that decides the regions spanning the run (`aitune.analysis.attribution.spanning_regions`)."""

_Node = TypeVar("_Node", RegionShare, TreeNode, PhaseRegion)


@dataclass(frozen=True)
class HeadlineRow:
    """One row of the headline with its value in every measured run (0 in a run where it did not run)."""

    label: str  # what a table shows: the region id, "<region id> (self)" or "(residual)"
    path: str  # what compare lines rows up by: the region's path, "<path> (self)" or "(residual)"
    role: str  # "region", "self" (a looked-through region's own time) or "residual"
    region_id: str | None  # the region (for a self row, the looked-through one); None for the residual
    calls: list[int]
    times_us: list[float]
    fractions: list[float]  # of each run's time in the domain

    @property
    def share(self) -> float:
        """Its share of the run, as every reader shows it (`aitune.analysis.shares.median_share`)."""
        return median_share(self.fractions)


def looks_through(shares: Sequence[float], has_children: Sequence[bool]) -> bool:
    """The one rule of every reader: a region is shown as its parts when it holds at least
    `LOOK_THROUGH_SHARE` of the run (median of its CPU ``shares`` over the runs) and has regions
    below it in every run, whatever its siblings hold.

    >>> looks_through([0.995, 0.99], [True, True]), looks_through([0.995], [False]), looks_through([0.8], [True])
    (True, False, False)
    """
    return bool(shares) and statistics.median(shares) >= LOOK_THROUGH_SHARE and all(has_children)


def looked_through(doc: ProfileLike) -> list[str]:
    """The paths of the regions the headline shows as their parts (spanning ones included), outermost first."""
    return [row.path.removesuffix(SELF_SUFFIX) for row in headline_rows(doc) if row.role == "self"]


def headline_rows(doc: ProfileLike, domain: str = "cpu", keep: Collection[str] = ()) -> list[HeadlineRow]:
    """The headline's rows in document order: regions (a looked-through one as its parts, then its self
    row), one self row per spanning region, then the residual.

    ``keep``: paths shown whole even where `looks_through` holds (compare keeps a region whole when
    the other side cannot look through it, e.g. a tuned wrapper with nothing inside). Within
    `aitune.report.memo.computed_once`, a document's rows per ``domain`` and ``keep`` are found once.
    """
    record = as_profile(doc)
    return derived(record, ("headline", domain, frozenset(keep)), lambda: _found_rows(record, domain, keep))


def _found_rows(record: Profile, domain: str, keep: Collection[str]) -> list[HeadlineRow]:
    runs = record.runs
    rows = _Rows(domain, [_time(run.timing, domain) for run in runs])
    spanning = given(record.spanning_regions, [])
    split = [_spanning_nodes(run, spanning) for run in runs]
    chains, trees = [chain for chain, _ in split], [_by_id(level) for _, level in split]
    cpu_totals = [run.timing.cpu_time_us for run in runs]
    found = list(_level(rows, [_by_id(run.regions) for run in runs], trees, cpu_totals, keep))
    spanning_rows = [
        rows.self_row(region, [chain[depth] if depth < len(chain) else None for chain in chains])
        for depth, region in enumerate(spanning)
    ]
    named = [sum(item.times_us[index] for item in spanning_rows) for index in range(len(runs))]
    outside = [max(0.0, _time(run.residual, domain) - part) for run, part in zip(runs, named, strict=True)]
    return [*found, *spanning_rows, rows.make(RESIDUAL_LABEL, RESIDUAL_LABEL, "residual", None, outside)]


@dataclass(frozen=True)
class _Rows:
    """Builds the rows of one domain: times per run and their fractions of the runs' totals."""

    domain: str
    totals: list[float]

    def make(
        self, label: str, path: str, role: str, region: str | None, times: list[float], calls: list[int] | None = None
    ) -> HeadlineRow:
        """A row of ``times`` (µs per run); ``calls`` None for a row that is no region's (0 in every run)."""
        fractions = [fraction(time, total) for time, total in zip(times, self.totals, strict=True)]
        return HeadlineRow(label, path, role, region, [0] * len(times) if calls is None else calls, times, fractions)

    def region_row(self, region: str, nodes: Sequence[RegionShare | TreeNode | None]) -> HeadlineRow:
        times = [_time(node, self.domain) for node in nodes]
        return self.make(region, region_path(region), "region", region, times, _calls(nodes))

    def self_row(self, region: str, nodes: Sequence[TreeNode | None]) -> HeadlineRow:
        """The row of a region's self time: what none of its children accounts for."""
        times = [0.0 if node is None else (self_time_in(node, self.domain) or 0.0) for node in nodes]
        return self.make(region + SELF_SUFFIX, region_path(region) + SELF_SUFFIX, "self", region, times, _calls(nodes))


def _time(record: TimedRecord | None, domain: str) -> float:
    """The record's time in ``domain`` (µs); 0 where the run lacks the record or the domain."""
    return 0.0 if record is None else (time_in(record, domain) or 0.0)


def _calls(nodes: Sequence[RegionShare | TreeNode | PhaseRegion | None]) -> list[int]:
    return [0 if node is None else node.calls for node in nodes]


def _level(
    rows: _Rows,
    shares: Sequence[Mapping[str, RegionShare | TreeNode]],
    trees: Sequence[Mapping[str, TreeNode]],
    cpu_totals: Sequence[float],
    keep: Collection[str],
) -> Iterable[HeadlineRow]:
    """One level's rows: ``shares`` per run by region id give the times, ``trees`` the same level's tree nodes."""
    for region in dict.fromkeys(region for by_id in shares for region in by_id):
        nodes = [tree.get(region) for tree in trees]
        children = [[] if node is None else node.children for node in nodes]
        cpu = [fraction(_time(node, "cpu"), total) for node, total in zip(nodes, cpu_totals, strict=True)]
        path = region_path(region)
        if path in keep or not looks_through(cpu, [bool(below) for below in children]):
            yield rows.region_row(region, [by_id.get(region) for by_id in shares])
            continue
        below = [_by_id(level) for level in children]
        yield from _level(rows, below, below, cpu_totals, keep)
        yield rows.self_row(region, nodes)


def _by_id(nodes: Iterable[_Node]) -> dict[str, _Node]:
    return {node.region_id: node for node in nodes}


def _spanning_nodes(run: Run, spanning: Sequence[str]) -> tuple[list[TreeNode], Sequence[TreeNode]]:
    """The tree nodes of the spanning chain in one run, outermost first (fewer if the tree lacks them),
    and the tree nodes of the level below it: those of ``runs[i].regions`` (none if the tree lacks them)."""
    nodes: list[TreeNode] = []
    level = given(run.tree, [])
    for region in spanning:
        node = next((candidate for candidate in level if candidate.region_id == region), None)
        if node is None:
            return nodes, ()
        nodes.append(node)
        level = node.children
    return nodes, level


def phase_rows(doc: ProfileLike, phase: str) -> list[HeadlineRow]:
    """The headline of one phase of a generate-like document (``runs[i].phases``, `aitune.analysis.phases`):
    its regions, then its residual, each with its fraction of the phase in every run (0 where a run
    lacks the phase). [] when the document has no such phase.

    Invariant: per run, the rows' fractions add up to 1, as the phase's regions and residual do.
    """
    found = [next((p for p in given(run.phases, []) if p.name == phase), None) for run in as_profile(doc).runs]
    if all(entry is None for entry in found):
        return []
    rows = _Rows("cpu", [_cpu_time(entry) for entry in found])
    by_run = [{} if entry is None else _by_id(entry.regions) for entry in found]
    regions = dict.fromkeys(region for level in by_run for region in level)
    residuals = [None if entry is None else entry.residual for entry in found]
    return [
        *(_phase_region_row(rows, region, [level.get(region) for level in by_run]) for region in regions),
        rows.make(RESIDUAL_LABEL, RESIDUAL_LABEL, "residual", None, [_cpu_time(residual) for residual in residuals]),
    ]


def _phase_region_row(rows: _Rows, region: str, parts: Sequence[PhaseRegion | None]) -> HeadlineRow:
    return rows.make(region, region_path(region), "region", region, [_cpu_time(part) for part in parts], _calls(parts))


def _cpu_time(part: Phase | PhaseRegion | Cause | None) -> float:
    """A phase's, or a part of one's, CPU time (µs); 0 where the run lacks it."""
    return 0.0 if part is None else part.cpu_time_us
