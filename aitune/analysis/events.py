"""The events model: a Chrome trace read once into small frozen records (µs floats, no torch).

Only what analysis needs is kept: aitune's run and region spans, CPU operator spans, host-side
launches of device work, and the device activities (kernels, copies, sets) they started.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aitune.markers import REGION_SPAN_PREFIX, RUN_SPAN_PREFIX, TRACE_METADATA_KEY

ThreadKey = tuple[Any, Any]
"""(pid, tid) of the thread a CPU span ran on."""

DEVICE_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
LAUNCH_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver"})


@dataclass(frozen=True, slots=True)
class Span:
    """One complete CPU-side event: a run, a region entry or an operator."""

    name: str
    start_us: float
    duration_us: float  # kept as the trace wrote it: end - start would add float noise
    thread: ThreadKey

    @property
    def end_us(self) -> float:
        return self.start_us + self.duration_us


@dataclass(frozen=True, slots=True)
class Launch:
    """A host-side runtime call (cudaLaunchKernel, cudaMemcpyAsync, …) that started device work."""

    name: str
    start_us: float
    thread: ThreadKey
    correlation: int


@dataclass(frozen=True, slots=True)
class DeviceActivity:
    """Work that ran on the device, linked to its launch by the correlation id."""

    name: str
    category: str
    start_us: float
    duration_us: float
    correlation: int


@dataclass(frozen=True)
class TraceEvents:
    """Everything analysis reads from one trace; lists are in trace order."""

    runs: list[Span] = field(default_factory=list)
    regions: list[Span] = field(default_factory=list)
    ops: list[Span] = field(default_factory=list)
    launches: list[Launch] = field(default_factory=list)
    device: list[DeviceActivity] = field(default_factory=list)
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def has_device_data(self) -> bool:
        return bool(self.device)


def read_trace_events(trace: Mapping[str, Any]) -> TraceEvents:
    """Read a Chrome trace document (``{"traceEvents": [...], "aitune": {...}}``) into `TraceEvents`.

    One pass over the events; unknown categories and non-complete events are skipped.
    """
    events = TraceEvents(metadata=trace.get(TRACE_METADATA_KEY) or {})
    for raw in trace.get("traceEvents", ()):
        if raw.get("ph") != "X":
            continue
        category = raw.get("cat", "")
        name = raw.get("name", "")
        start = float(raw["ts"])
        duration = float(raw.get("dur", 0.0))
        if category == "user_annotation":
            span = Span(name, start, duration, (raw.get("pid"), raw.get("tid")))
            if name.startswith(REGION_SPAN_PREFIX):
                events.regions.append(span)
            elif name.startswith(RUN_SPAN_PREFIX):
                events.runs.append(span)
        elif category == "cpu_op":
            events.ops.append(Span(name, start, duration, (raw.get("pid"), raw.get("tid"))))
        elif category in LAUNCH_CATEGORIES:
            correlation = _correlation(raw)
            if correlation is not None:
                events.launches.append(Launch(name, start, (raw.get("pid"), raw.get("tid")), correlation))
        elif category in DEVICE_CATEGORIES:
            correlation = _correlation(raw)
            if correlation is not None:
                events.device.append(DeviceActivity(name, category, start, duration, correlation))
    return events


def _correlation(raw: Mapping[str, Any]) -> int | None:
    value = (raw.get("args") or {}).get("correlation")
    return int(value) if value is not None else None
