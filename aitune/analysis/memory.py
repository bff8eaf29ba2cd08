"""Memory per run and region: what the allocator handed out and took back while each region ran.

From the profiler's memory events (``profile_memory``: one ``[memory]`` instant event per allocation
or free, the CPU allocator's and, on a GPU, the CUDA caching allocator's), per run, per region and per
device:

- ``allocated_bytes``: the bytes the region allocated, summed over its calls in the run;
- ``freed_bytes``: the bytes it freed (its own allocations or older ones);
- ``peak_live_bytes``: the most bytes its own allocations held alive at once above what was live when
  it was entered (0 when it only freed), the highest of its calls;
- ``allocator_peak_bytes``: the allocator's own count of live bytes at its highest while the region
  ran, when the events give one (the CUDA allocator counts every live tensor of the device; torch's CPU
  allocator counts only from the profiler session's start).

A region's events are those on its thread between its entry and its exit, its nested regions'
included (regions nest, as their times do). Bytes are exact integers: no estimate, no sampling.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aitune.analysis.event_records import MemoryEvent
from aitune.analysis.events import Span, ThreadKey, TraceEvents
from aitune.markers import span_region_id, span_run_index

STATS = ("allocated_bytes", "freed_bytes", "peak_live_bytes")

OPERATOR_RUNS, MEASURED_RUNS, MEMORY_RUN = "operator_runs", "runs", "memory_run"
"""``memory.runs_from``: the document's operator runs, its measured runs (a trace recorded with memory
by someone else), or one run of its own before the measured runs (a capture with the profiler in every run)."""

MEMORY_KEY = "memory"
"""The trace metadata's key for a memory run's section, and the document's for every memory section."""


@dataclass(frozen=True)
class MemoryStats:
    """What the allocator of one device did while one span (or the calls of one region) ran."""

    allocated_bytes: int = 0
    freed_bytes: int = 0
    peak_live_bytes: int = 0
    allocator_peak_bytes: int | None = None

    def plus(self, other: MemoryStats) -> MemoryStats:
        """Two calls of one region: sums of their bytes, the higher of their peaks."""
        peaks = [peak for peak in (self.allocator_peak_bytes, other.allocator_peak_bytes) if peak is not None]
        return MemoryStats(
            self.allocated_bytes + other.allocated_bytes,
            self.freed_bytes + other.freed_bytes,
            max(self.peak_live_bytes, other.peak_live_bytes),
            max(peaks) if peaks else None,
        )

    def to_dict(self) -> dict[str, int]:
        out = {"allocated_bytes": self.allocated_bytes, "freed_bytes": self.freed_bytes}
        out["peak_live_bytes"] = self.peak_live_bytes
        if self.allocator_peak_bytes is not None:
            out["allocator_peak_bytes"] = self.allocator_peak_bytes
        return out


class _Stream:
    """One thread's memory events on one device, in time order, with running sums to read any stretch."""

    def __init__(self, events: Sequence[MemoryEvent]) -> None:
        ordered = sorted(events, key=lambda event: event.time_us)
        self.times = np.array([event.time_us for event in ordered], dtype=np.float64)
        sizes = [event.bytes for event in ordered]
        # Python ints: byte counts of a long run can pass 2⁵³, where float sums stop being exact.
        self.net = np.cumsum(np.array(sizes, dtype=object)) if sizes else np.array([], dtype=object)
        self.allocated = np.cumsum(np.array([max(size, 0) for size in sizes], dtype=object)) if sizes else self.net
        self.totals = [event.allocator_total for event in ordered]

    def stats(self, start_us: float, end_us: float) -> MemoryStats:
        """The stats of the events from ``start_us`` to ``end_us``, both included."""
        first = int(np.searchsorted(self.times, start_us, side="left"))
        last = int(np.searchsorted(self.times, end_us, side="right"))
        if last <= first:
            return MemoryStats()
        base_net = self.net[first - 1] if first else 0
        base_allocated = self.allocated[first - 1] if first else 0
        allocated = int(self.allocated[last - 1] - base_allocated)
        net = int(self.net[last - 1] - base_net)
        peak = max(0, int(max(self.net[first:last]) - base_net))
        totals = [total for total in self.totals[first:last] if total is not None]
        return MemoryStats(allocated, allocated - net, peak, max(totals) if totals else None)


@dataclass(frozen=True)
class RunMemory:
    """One run's memory: the whole run's per device, and each region's (every level, ids in order seen)."""

    run_index: int
    devices: Mapping[str, MemoryStats]
    regions: Mapping[str, tuple[int, Mapping[str, MemoryStats]]]  # region id → (calls, stats by device)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_index": self.run_index,
            "devices": {device: stats.to_dict() for device, stats in self.devices.items()},
            "regions": [
                {
                    "region_id": region,
                    "calls": calls,
                    "devices": {device: stats.to_dict() for device, stats in by_device.items()},
                }
                for region, (calls, by_device) in self.regions.items()
            ],
        }


def run_memory(events: TraceEvents) -> list[RunMemory]:
    """Every run's `RunMemory`, in run order; [] when the trace holds no memory events (none recorded,
    which is not zero bytes: readers say so)."""
    if not events.memory:
        return []
    devices = sorted({event.device for event in events.memory})
    streams = _streams(events.memory)
    found: dict[int, RunMemory] = {}
    for thread, view in events.threads.items():
        runs = [events.runs[index] for index in view.runs]
        regions = [events.regions[index] for index in view.regions]
        owners = view.region_runs.tolist()
        for run in runs:
            found[span_run_index(run.name)] = RunMemory(
                span_run_index(run.name), _span_stats(streams, thread, devices, run), {}
            )
        for span, owner in zip(regions, owners, strict=True):
            if owner >= 0:
                _add_region(
                    found[span_run_index(runs[owner].name)].regions, span, _span_stats(streams, thread, devices, span)
                )
    return [found[index] for index in sorted(found)]


def _streams(memory: Sequence[MemoryEvent]) -> dict[tuple[ThreadKey, str], _Stream]:
    grouped: dict[tuple[ThreadKey, str], list[MemoryEvent]] = {}
    for event in memory:
        grouped.setdefault((event.thread, event.device), []).append(event)
    return {key: _Stream(events) for key, events in grouped.items()}


def _span_stats(
    streams: Mapping[tuple[ThreadKey, str], _Stream], thread: ThreadKey, devices: Sequence[str], span: Span
) -> dict[str, MemoryStats]:
    """The stats of ``span`` on every device the trace's memory events name (zeros where it saw none)."""
    return {
        device: streams[(thread, device)].stats(span.start_us, span.end_us)
        if (thread, device) in streams
        else MemoryStats()
        for device in devices
    }


def _add_region(
    regions: dict[str, tuple[int, Mapping[str, MemoryStats]]], span: Span, stats: Mapping[str, MemoryStats]
) -> None:
    region = span_region_id(span.name)
    if region not in regions:
        regions[region] = (1, stats)
        return
    calls, before = regions[region]
    regions[region] = (calls + 1, {device: before[device].plus(stats[device]) for device in stats})


def memory_section(events: TraceEvents, runs_from: str) -> dict[str, Any]:
    """The document's ``memory`` section of the runs in ``events``, which are the document's ``runs_from``
    (``runs``, ``operator_runs`` or ``memory_run``): ``event_count`` 0 and no ``runs`` when the trace
    holds no memory events."""
    section: dict[str, Any] = {"runs_from": runs_from, "event_count": len(events.memory)}
    measured = run_memory(events)
    if measured:
        section["devices"] = sorted({event.device for event in events.memory})
        section["runs"] = [run.to_dict() for run in measured]
    return section
