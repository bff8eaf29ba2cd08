"""Communication as its own time: for every region-tree node, every run and every run's residual.

- CPU (``cpu_time_us``): wall time inside the region's spans during which a collective or
  point-to-point operation (`aitune.analysis.collectives`) was in flight on any thread of the
  process. The union of the communication spans, so a ``record_param_comms`` inside a
  ``c10d::allreduce_`` counts once; any thread, because gloo moves the data on its own worker
  thread (``gloo:all_reduce``) while the caller's ``c10d::allreduce_`` returns once it has queued
  the work, and the caller's wait is no operator. A total, like ``cpu_time_us``: a node's includes
  its children's.
- Device (``device_time_us``): duration of the NCCL kernels the region launched, summed as the
  region's ``device_time_us`` is.
- ``bytes``: of the operations that started while the region was open. From ``record_param_comms``
  where the trace has any (NCCL), else from the backend's spans (``gloo:*``, recorded with
  ``record_shapes=True``); never both, so each operation counts once.
- Overlap (per run, device): the NCCL kernel time during which a non-communication kernel ran too.

Invariant: per run and domain, Σ topmost regions + residual = the run's communication.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aitune.analysis.collectives import PARAM_COMMS
from aitune.analysis.event_records import CommunicationSpan
from aitune.analysis.events import Span, TraceEvents
from aitune.analysis.intervals import Interval, columns, covered_within, enclosing_array, intersection, merged
from aitune.analysis.membership import NodeKey, node_keys, nodes_at
from aitune.analysis.shares import fraction
from aitune.markers import span_run_index


@dataclass
class CommunicationShare:
    """Communication of one region-tree node, run or residual: CPU and device µs, bytes."""

    cpu_time_us: float = 0.0
    device_time_us: float = 0.0
    bytes: int = 0

    def minus(self, parts: Iterable[CommunicationShare]) -> CommunicationShare:
        """What ``parts`` leave of this share, never below 0 (the residual of a run's share)."""
        left = CommunicationShare(self.cpu_time_us, self.device_time_us, self.bytes)
        for part in parts:
            left.cpu_time_us -= part.cpu_time_us
            left.device_time_us -= part.device_time_us
            left.bytes -= part.bytes
        return CommunicationShare(max(0.0, left.cpu_time_us), max(0.0, left.device_time_us), max(0, left.bytes))


@dataclass(frozen=True)
class Communication:
    """Communication of a trace, by region-tree node and by run. ``in_flight``: when it was in flight (CPU, merged)."""

    nodes: dict[NodeKey, CommunicationShare]
    runs: dict[int, CommunicationShare]
    device_overlap_us: dict[int, float]
    in_flight: list[Interval]
    with_device: bool  # the trace has device data: shares carry device_time_us
    with_bytes: bool  # some operation's bytes are known: shares carry bytes

    def share(self, key: NodeKey) -> dict[str, Any]:
        """The ``communication`` object of a region-tree node (zeros when nothing ran inside it)."""
        return self.to_dict(self.nodes.get(key, CommunicationShare()))

    def residual(self, run_index: int, level: Iterable[NodeKey]) -> CommunicationShare:
        """A run's communication outside the regions ``level`` (the run's topmost, disjoint regions)."""
        total = self.runs.get(run_index, CommunicationShare())
        return total.minus(self.nodes[key] for key in level if key in self.nodes)

    def run(self, run_index: int) -> dict[str, Any]:
        """The ``communication`` object of a run: its totals, and on a device the overlap with compute."""
        total = self.runs.get(run_index, CommunicationShare())
        out = self.to_dict(total)
        if self.with_device:
            overlap = self.device_overlap_us.get(run_index, 0.0)
            out["device_overlap_us"] = overlap
            out["device_overlap_fraction"] = fraction(overlap, total.device_time_us)
        return out

    def to_dict(self, share: CommunicationShare) -> dict[str, Any]:
        """``{"cpu_time_us", "device_time_us", "bytes"}``; device and bytes only when the trace has them."""
        out: dict[str, Any] = {"cpu_time_us": share.cpu_time_us}
        if self.with_device:
            out["device_time_us"] = share.device_time_us
        if self.with_bytes:
            out["bytes"] = share.bytes
        return out


def communication(events: TraceEvents) -> Communication | None:
    """Communication time and bytes of every region-tree node and run; None when the trace holds none."""
    kernels = events.communication_kernels
    if not events.communication and not kernels:
        return None
    in_flight = merged((span.start_us, span.end_us) for span in events.communication)
    carriers = _byte_carriers(events.communication)
    nodes: dict[NodeKey, CommunicationShare] = defaultdict(CommunicationShare)
    runs: dict[int, CommunicationShare] = {span_run_index(run.name): CommunicationShare() for run in events.runs}
    device_of = {activity.correlation: 0.0 for activity in kernels}
    for activity in kernels:
        device_of[activity.correlation] += activity.duration_us
    keys = node_keys(events.runs, events.region_tree)
    for view in events.threads.values():
        if not view.runs:
            continue
        thread_runs = [events.runs[i] for i in view.runs]
        regions = [events.regions[i] for i in view.regions]
        for span, node in zip(regions, view.region_nodes.tolist(), strict=True):
            if node >= 0:
                nodes[keys[node]].cpu_time_us += covered_within(in_flight, span.start_us, span.end_us)
        for run in thread_runs:
            runs[span_run_index(run.name)].cpu_time_us += covered_within(in_flight, run.start_us, run.end_us)
        # bytes: at the operation's start, on whichever thread it ran, in this thread's runs and regions
        starts = [span.start_us for span in carriers]
        in_run = enclosing_array(columns(thread_runs), starts).tolist()
        in_node = nodes_at(view.region_nodes, enclosing_array(columns(regions), starts)).tolist()
        sent = [span.bytes or 0 for span in carriers]
        _add_at_start(sent, "bytes", in_run, in_node, thread_runs, keys, nodes, runs)
        launched = [
            position for position, index in enumerate(view.launches) if events.launches[index].correlation in device_of
        ]  # NCCL kernel µs: at launch
        ran = [device_of[events.launches[view.launches[position]].correlation] for position in launched]
        launch_nodes = nodes_at(view.region_nodes, view.launch_regions)
        picked = np.array(launched, dtype=np.intp)
        in_run, in_node = view.launch_runs[picked].tolist(), launch_nodes[picked].tolist()
        _add_at_start(ran, "device_time_us", in_run, in_node, thread_runs, keys, nodes, runs)
    return Communication(
        nodes=dict(nodes),
        runs=runs,
        device_overlap_us=_device_overlap(events) if kernels else {},
        in_flight=in_flight,
        with_device=events.has_device_data,
        with_bytes=bool(carriers),
    )


def _byte_carriers(spans: Sequence[CommunicationSpan]) -> list[CommunicationSpan]:
    """The spans whose bytes count: ``record_param_comms``'s where any has bytes, else the backend spans'."""
    known = [span for span in spans if span.bytes is not None]
    param_comms = [span for span in known if span.bytes_from == PARAM_COMMS]
    return param_comms or known


def _add_at_start(
    amounts: Sequence[float],
    key: str,
    in_run: Sequence[int],
    in_node: Sequence[int],
    runs: Sequence[Span],
    keys: Sequence[NodeKey],
    nodes: dict[NodeKey, CommunicationShare],
    totals: dict[int, CommunicationShare],
) -> None:
    """Each amount to the ``key`` (bytes, device µs) of the run it started in (``in_run``, a position in ``runs``)
    and of the region-tree node open at its start (``in_node``, a position in ``keys``) and that node's ancestors;
    an amount outside every run (a warmup's, or between runs) is left out."""
    for amount, run, node in zip(amounts, in_run, in_node, strict=True):
        if run < 0:
            continue
        above = _ancestors(keys[node] if node >= 0 else None)
        for share in (totals[span_run_index(runs[run].name)], *(nodes[upper] for upper in above)):
            setattr(share, key, getattr(share, key) + amount)


def _ancestors(key: NodeKey | None) -> list[NodeKey]:
    """A node and the nodes above it, up to its topmost region; [] for None."""
    if key is None:
        return []
    run_index, path = key
    return [(run_index, path[:depth]) for depth in range(len(path), 0, -1)]


def _device_overlap(events: TraceEvents) -> dict[int, float]:
    """Per run: the NCCL kernel time during which a non-communication kernel of the same run ran too."""
    run_of: dict[int, int] = {}
    for view in events.threads.values():
        runs = [events.runs[i] for i in view.runs]
        run_of.update(
            (events.launches[index].correlation, span_run_index(runs[owner].name))
            for index, owner in zip(view.launches, view.launch_runs.tolist(), strict=True)
            if owner >= 0
        )
    nccl = {activity.correlation for activity in events.communication_kernels}
    busy: dict[tuple[int, bool], list[Interval]] = {}
    for activity in events.device:
        run = run_of.get(activity.correlation)
        if run is not None and activity.category == "kernel":
            busy.setdefault((run, activity.correlation in nccl), []).append(
                (activity.start_us, activity.start_us + activity.duration_us)
            )
    return {
        run: sum(end - start for start, end in intersection(merged(busy.get((run, True), ())), merged(compute)))
        for (run, is_nccl), compute in busy.items()
        if not is_nccl
    }
