"""Per-run attribution: which region owns each microsecond of a measured run.

A region span nested inside another region span (same thread, same run) belongs to its enclosing
region for that call, so the topmost spans of a run are disjoint and nothing is counted twice.

Invariant: per domain present, Σ topmost-region fractions + residual fraction = 1.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from aitune.analysis.event_records import Launch
from aitune.analysis.events import Span, ThreadView, TraceEvents
from aitune.analysis.intervals import Interval, union_length
from aitune.analysis.membership import MAX_REGION_DEPTH
from aitune.analysis.shares import SPANS_RUN_FRACTION, fraction
from aitune.errors import ProfileError
from aitune.markers import span_region_id, span_run_index


@dataclass
class RegionNode:
    """One region's totals within one run, with the regions entered while it was open."""

    region_id: str
    calls: int = 0
    cpu_time_us: float = 0.0
    device_time_us: float = 0.0
    device_busy_us: float = 0.0  # union of its kernels' intervals: below device_time_us when they overlap
    children: dict[str, RegionNode] = field(default_factory=dict)

    def child(self, region: str) -> RegionNode:
        return self.children.setdefault(region, RegionNode(region))


@dataclass
class AttributedRun:
    """One measured run: its timing and the disjoint regions its time splits into.

    ``regions`` are the topmost regions, or, after `descend`, the level below the regions that span
    the run (kept in ``spanning``, outermost first); `roots` is the top of the region tree either way.
    """

    run_index: int
    cpu_time_us: float
    wall_time_us: float | None = None
    device_time_us: float | None = None
    regions: dict[str, RegionNode] = field(default_factory=dict)
    spanning: tuple[RegionNode, ...] = ()

    def roots(self) -> dict[str, RegionNode]:
        """The topmost regions of the run's tree: the outermost spanning region, or ``regions``."""
        return {self.spanning[0].region_id: self.spanning[0]} if self.spanning else self.regions

    def residual(self) -> dict[str, float]:
        """Time outside every topmost region per domain present, as µs and fraction (clamped ≥ 0)."""
        out: dict[str, float] = {}
        domains = [("cpu", self.cpu_time_us)]
        if self.device_time_us is not None:
            domains.append(("device", self.device_time_us))
        for domain, run_us in domains:
            covered = (getattr(node, f"{domain}_time_us") for node in self.regions.values())
            outside, fraction = residual(run_us, covered)
            out[f"{domain}_time_us"] = outside
            out[f"{domain}_time_fraction"] = fraction
        return out


@dataclass(frozen=True)
class Attribution:
    """The result of attributing a trace: the runs, and the region spans no run could claim."""

    runs: list[AttributedRun]
    unmapped_region_spans: int
    observed_region_ids: list[str]


def spanning_regions(runs: Sequence[AttributedRun]) -> list[str]:
    """The regions inside which every run's time is spent, outermost first; [] when it splits at the top.

    A region spans the run when, in every run, it is the only region at its level, has regions of
    its own below it, and holds at least `SPANS_RUN_FRACTION` of the run's CPU time (median over
    the runs): a root entry method such as ``generate``, or a pipeline-like module that calls all
    the others. Listing it alone says nothing, so the check repeats one level down. Decided once
    for all runs, so every run lists the same level.
    """
    chain: list[str] = []
    levels = [run.regions for run in runs]
    while levels and all(len(level) == 1 for level in levels):
        region = next(iter(levels[0]))
        if any(region not in level for level in levels):
            break
        nodes = [level[region] for level in levels]
        shares = [fraction(node.cpu_time_us, run.cpu_time_us) for node, run in zip(nodes, runs, strict=True)]
        if statistics.median(shares) < SPANS_RUN_FRACTION or not all(node.children for node in nodes):
            break
        chain.append(region)
        levels = [node.children for node in nodes]
    return chain


def descend(run: AttributedRun, through: Sequence[str]) -> AttributedRun:
    """``run`` with ``regions`` at the level below the chain ``through`` (from `spanning_regions`).

    The residual then holds the spanning regions' self time as well as the time outside them.
    """
    chain: list[RegionNode] = []
    level = run.regions
    for region in through:
        chain.append(level[region])
        level = level[region].children
    return replace(run, regions=dict(level), spanning=tuple(chain))


def residual(run_us: float, covered_us: Iterable[float]) -> tuple[float, float]:
    """Time of the run outside every topmost region, as (µs, fraction); never below 0.

    >>> residual(100.0, [30.0, 50.0])
    (20.0, 0.2)
    """
    outside = max(0.0, run_us - sum(covered_us))
    return outside, (min(1.0, outside / run_us) if run_us > 0 else 0.0)


def attribute_runs(events: TraceEvents, wall_times_us: Sequence[float] = ()) -> Attribution:
    """Attribute every measured run of a trace to its regions and residual.

    Device time of a region is the duration of the device work launched while its span was the
    innermost open region (kernel ↔ launch by correlation id), summed up the region's ancestors.
    Which run and region holds each span, and the region tree, are the model's (`aitune.analysis.membership`).
    `ProfileError` when region spans nest deeper than `MAX_REGION_DEPTH`.
    """
    for view in events.threads.values():
        _check_depth(events, view)
    device_work = _device_work_by_correlation(events)
    runs = [_empty_run(span, wall_times_us, events.has_device_data) for span in events.runs]
    nodes = _tree_nodes(events, runs)

    unmapped = 0
    observed: dict[str, None] = {}
    for view in events.threads.values():
        thread_regions = [events.regions[i] for i in view.regions]
        thread_launches = [events.launches[i] for i in view.launches]
        for launch, owner in zip(thread_launches, view.launch_runs.tolist(), strict=True):
            work = device_work.get(launch.correlation)
            if owner >= 0 and work:
                run = runs[view.runs[owner]]
                run.device_time_us = (run.device_time_us or 0.0) + sum(end - start for start, end in work)
        unmapped += int((view.region_runs < 0).sum())
        for region in _region_ids(thread_regions):
            observed.setdefault(region, None)
        launched = _work_launched_by_span(view, thread_launches, device_work)
        _fold_region_spans(view, thread_regions, launched, nodes)
    return Attribution(runs=runs, unmapped_region_spans=unmapped, observed_region_ids=list(observed))


def _empty_run(span: Span, wall_times_us: Sequence[float], has_device: bool) -> AttributedRun:
    index = span_run_index(span.name)
    wall = wall_times_us[index] if index < len(wall_times_us) else None
    return AttributedRun(
        run_index=index,
        cpu_time_us=span.duration_us,
        wall_time_us=wall,
        device_time_us=0.0 if has_device else None,
    )


def _device_work_by_correlation(events: TraceEvents) -> dict[int, list[Interval]]:
    """(start, end) of the device work each launch started, by correlation id (from the model's join)."""
    return {
        correlation: [(activity.start_us, activity.start_us + activity.duration_us) for activity in work]
        for correlation, work in events.device_of.items()
    }


def _region_ids(spans: Sequence[Span]) -> list[str]:
    return [span_region_id(span.name) for span in spans]


def _check_depth(events: TraceEvents, view: ThreadView) -> None:
    """`ProfileError` naming the first region span (parents first) that nests deeper than `MAX_REGION_DEPTH`."""
    too_deep = view.region_depths > MAX_REGION_DEPTH
    if not bool(too_deep.any()):
        return
    index = int(view.region_order[too_deep[view.region_order]][0])
    span = events.regions[view.regions[index]]
    raise ProfileError(
        f"region spans nest more than {MAX_REGION_DEPTH} deep ({span_region_id(span.name)[:60]!r} at "
        f"{span.start_us} µs), deeper than any model's modules; annotate fewer nested levels."
    )


def _tree_nodes(events: TraceEvents, runs: Sequence[AttributedRun]) -> list[RegionNode]:
    """A `RegionNode` for each node of the model's ``region_tree``, placed in its run's tree, in the tree's order."""
    nodes: list[RegionNode] = []
    node_of: dict[tuple[int, tuple[str, ...]], RegionNode] = {}
    for run, path in events.region_tree:
        if len(path) == 1:
            node = runs[run].regions.setdefault(path[0], RegionNode(path[0]))
        else:
            node = node_of[run, path[:-1]].child(path[-1])
        node_of[run, path] = node
        nodes.append(node)
    return nodes


def _work_launched_by_span(
    view: ThreadView, launches: Sequence[Launch], device_work: Mapping[int, list[Interval]]
) -> list[list[Interval]]:
    """The device work launched while each of the thread's region spans was the innermost open one."""
    launched: list[list[Interval]] = [[] for _ in view.regions]
    if not device_work:
        return launched
    for launch, owner in zip(launches, view.launch_regions.tolist(), strict=True):
        if owner >= 0:
            launched[owner] += device_work.get(launch.correlation, ())
    return launched


def _fold_region_spans(
    view: ThreadView, spans: Sequence[Span], launched: list[list[Interval]], nodes: Sequence[RegionNode]
) -> None:
    """Add each region span of one thread to its node of the region tree (``nodes``, by the model's ``region_tree``).

    ``launched`` (the device work each span launched itself) is extended in place with its children's.
    """
    order = view.region_order.tolist()
    parent_of = view.region_parents.tolist()
    for index in reversed(order):  # children before parents: device work flows upwards
        parent = parent_of[index]
        if parent >= 0:
            launched[parent] += launched[index]
    node_of = view.region_nodes.tolist()
    for index in order:
        if node_of[index] < 0:  # outside every run
            continue
        node = nodes[node_of[index]]
        node.calls += 1
        node.cpu_time_us += spans[index].duration_us
        if launched[index]:
            node.device_time_us += sum(end - start for start, end in launched[index])
            node.device_busy_us += union_length(launched[index])
