"""Each region's work: the FLOPs and bytes of the operators with a formula (`aitune.analysis.work`)
that ran directly inside it, the time they took, and the time of the operators that have none.

An operator is *counted* when it has a formula, its shapes were recorded, and no operator enclosing
it is counted (``aten::linear`` is counted once, its ``aten::addmm`` not again). A region's operator
time is the time of its topmost operators, as its operator mix (`aitune.analysis.region_operators`)
has it: the counted operators' time, and the rest, *uncounted* — elementwise operators, norms,
copies, and any operator without a formula or without recorded shapes — named by its topmost
operator. Uncounted time is never read as zero work: readers say how much of a region it is.

With device data, each counted operator's device time is the time of the kernels launched inside
it; the region's other kernels are its uncounted device time.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aitune.analysis.events import ThreadView, TraceEvents
from aitune.analysis.intervals import enclosing_array
from aitune.analysis.membership import NodeKey, node_keys, nodes_at
from aitune.analysis.work import OpWork, operator_work

MAX_UNCOUNTED_NAMES = 8
"""Uncounted operators named per region (the longest first); the rest are summed as ``(others)``."""


@dataclass
class RegionWork:
    """The work directly inside one region in one run (CPU µs; device µs only with device data)."""

    flops: int = 0
    bytes: int = 0
    counted: int = 0  # operators counted
    counted_cpu_us: float = 0.0
    uncounted_cpu_us: float = 0.0
    flops_by_dtype: dict[str, int] = field(default_factory=dict)
    uncounted: dict[str, float] = field(default_factory=dict)  # topmost operator name → CPU µs
    counted_device_us: float | None = None
    uncounted_device_us: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The document's ``work`` object: device keys only with device data, at most
        `MAX_UNCOUNTED_NAMES` uncounted names (the longest), the rest as ``(others)``."""
        ranked = sorted(self.uncounted.items(), key=lambda item: (-item[1], item[0]))
        named = dict(ranked[:MAX_UNCOUNTED_NAMES])
        if len(ranked) > MAX_UNCOUNTED_NAMES:
            named["(others)"] = sum(time for _, time in ranked[MAX_UNCOUNTED_NAMES:])
        doc: dict[str, Any] = {
            "flops": self.flops,
            "bytes": self.bytes,
            "counted_operators": self.counted,
            "counted_cpu_time_us": self.counted_cpu_us,
            "uncounted_cpu_time_us": self.uncounted_cpu_us,
            "flops_by_dtype": dict(sorted(self.flops_by_dtype.items())),
            "uncounted_operators": named,
        }
        if self.counted_device_us is not None:
            doc["counted_device_time_us"] = self.counted_device_us
            doc["uncounted_device_time_us"] = self.uncounted_device_us or 0.0
        return doc


def region_work(events: TraceEvents) -> dict[NodeKey, RegionWork]:
    """The work of every region-tree node of every traced run (nodes without operators left out)."""
    works: dict[NodeKey, RegionWork] = defaultdict(RegionWork)
    keys = node_keys(events.runs, events.region_tree)
    for view in events.threads.values():
        if not view.regions or not len(view.ops):
            continue
        _thread_work(events, view, keys, works)
    return dict(works)


def _thread_work(events: TraceEvents, view: ThreadView, keys: list[NodeKey], works: dict[NodeKey, RegionWork]) -> None:
    names = events.ops.names
    top_of = _topmost_ancestor(view)
    op_nodes = nodes_at(view.region_nodes, view.op_regions).tolist()

    def key_of(position: int) -> NodeKey | None:
        node = op_nodes[position]
        return keys[node] if node >= 0 else None

    uncounted = {int(position): float(view.op_durations_us[position]) for position in np.flatnonzero(top_of < 0)}
    counted_spans: list[tuple[float, float]] = []
    counted_keys: list[NodeKey] = []
    for position, found in _outermost_counted(events, view):
        key = key_of(position)
        if key is None:
            continue
        work, duration = works[key], float(view.op_durations_us[position])
        work.flops += found.flops
        work.bytes += found.bytes
        work.counted += 1
        work.counted_cpu_us += duration
        work.flops_by_dtype[found.dtype] = work.flops_by_dtype.get(found.dtype, 0) + found.flops
        uncounted[position if top_of[position] < 0 else int(top_of[position])] -= duration
        counted_spans.append((float(view.op_starts_us[position]), duration))
        counted_keys.append(key)
    for position, left in uncounted.items():
        key = key_of(position)
        if key is None:
            continue
        work = works[key]
        if left > 0.0:
            name = names[view.ops[position]]
            work.uncounted_cpu_us += left
            work.uncounted[name] = work.uncounted.get(name, 0.0) + left
    if events.has_device_data:
        _device_work(events, view, keys, counted_spans, counted_keys, works)
        for work in works.values():  # every node of a device trace carries both device keys
            work.counted_device_us = work.counted_device_us or 0.0
            work.uncounted_device_us = work.uncounted_device_us or 0.0


def _topmost_ancestor(view: ThreadView) -> np.ndarray:
    """For each operator of ``view``, the position of its topmost enclosing operator; -1 for a topmost one.

    One numpy step per nesting level (pointer jumping), not a Python step per operator.
    """
    parents = view.op_parents
    top = parents.copy()
    while True:
        deeper = top >= 0
        deeper[deeper] = parents[top[deeper]] >= 0
        if not deeper.any():
            return top
        top[deeper] = parents[top[deeper]]


def _outermost_counted(events: TraceEvents, view: ThreadView) -> list[tuple[int, OpWork]]:
    """(position in ``view``, its work) of each operator with a work that no operator with a work
    encloses, in nesting order. Only the operators with recorded inputs are visited, each walking up
    its few enclosing operators."""
    names, inputs = events.ops.names, events.op_inputs
    ops = view.ops
    candidates = np.flatnonzero(np.isin(ops, np.fromiter(inputs, dtype=np.intp, count=len(inputs))))
    rank = np.empty(len(ops), dtype=np.intp)
    rank[view.op_order] = np.arange(len(ops))
    chosen: dict[int, OpWork] = {}
    for position in sorted(candidates.tolist(), key=rank.__getitem__):  # parents before children
        found = operator_work(names[ops[position]], inputs[int(ops[position])])
        if found is None:
            continue
        parent = int(view.op_parents[position])
        while parent >= 0 and parent not in chosen:
            parent = int(view.op_parents[parent])
        if parent < 0:
            chosen[position] = found
    return list(chosen.items())


def _device_work(
    events: TraceEvents,
    view: ThreadView,
    keys: list[NodeKey],
    counted_spans: list[tuple[float, float]],
    counted_keys: list[NodeKey],
    works: dict[NodeKey, RegionWork],
) -> None:
    """Device µs of the kernels launched inside each counted operator, and of the region's other kernels."""
    launches = [events.launches[i] for i in view.launches]
    starts = [launch.start_us for launch in launches]
    spans = sorted(zip(counted_spans, counted_keys, strict=True), key=lambda item: item[0][0])
    inside = enclosing_array(([s for (s, _), _ in spans], [d for (_, d), _ in spans]), starts)
    for key in set(counted_keys):
        works[key].counted_device_us = works[key].counted_device_us or 0.0
    for launch, node, counted in zip(
        launches, nodes_at(view.region_nodes, view.launch_regions).tolist(), inside.tolist(), strict=True
    ):
        device_us = sum(activity.duration_us for activity in events.device_of.get(launch.correlation, ()))
        key = spans[counted][1] if counted >= 0 else (keys[node] if node >= 0 else None)
        if key is None or not device_us:
            continue
        work = works[key]
        if counted >= 0:
            work.counted_device_us = (work.counted_device_us or 0.0) + device_us
        else:
            work.uncounted_device_us = (work.uncounted_device_us or 0.0) + device_us
            work.counted_device_us = work.counted_device_us or 0.0
