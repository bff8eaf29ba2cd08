"""The events model: a Chrome trace read once into small frozen records (µs floats, no torch).

Only what analysis needs is kept: run and region spans, CPU operator spans, host-side launches of
device work, the device activities (kernels, copies, sets) they started, and the CPU-side
communication spans (`aitune.analysis.collectives`) with the bytes their args give — the only
events whose args are read beyond the correlation id.

Runs and regions are always named in aitune's vocabulary (`aitune.markers`), whichever tool wrote
the trace: the markers of NVIDIA AITune 0.6 and of a plain torch.profiler session are translated
once, after the read (see `detect_trace_kind`), so every analysis reads one model.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

from aitune.analysis.collectives import CPU_PREFIXES, DEVICE_PREFIXES, communication_kind, message_bytes
from aitune.errors import ProfileError
from aitune.markers import (
    AITUNE_06_RUN_SPAN,
    AITUNE_06_SPAN_PREFIX,
    MODULE_CALL_PREFIX,
    PROFILER_STEP_PREFIX,
    REGION_SPAN_PREFIX,
    RUN_SPAN_PREFIX,
    SPAN_PREFIX,
    TRACE_KIND_AITUNE,
    TRACE_KIND_AITUNE_06,
    TRACE_KIND_TORCH,
    TRACE_METADATA_KEY,
    region_span_name,
    run_span_name,
    user_span_region_id,
)

ThreadKey = tuple[Any, Any]
"""(pid, tid) of the thread a CPU span ran on."""

DEVICE_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
LAUNCH_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver"})
SPAN_CATEGORIES = frozenset({"user_annotation", "cpu_op"})
"""aitune's spans are user annotations, or CPU ops when opened through torch's fast record-function path."""


class Span(NamedTuple):
    """One complete CPU-side event: a run, a region entry or an operator.

    A NamedTuple rather than a frozen dataclass: a trace holds ~10⁵ of them and tuples build ~5× faster.
    """

    name: str
    start_us: float
    duration_us: float  # kept as the trace wrote it: end - start would add float noise
    thread: ThreadKey

    @property
    def end_us(self) -> float:
        return self.start_us + self.duration_us


class Launch(NamedTuple):
    """A host-side runtime call (cudaLaunchKernel, cudaMemcpyAsync, cudaStreamSynchronize, …)."""

    name: str
    start_us: float
    duration_us: float
    thread: ThreadKey
    correlation: int


class DeviceActivity(NamedTuple):
    """Work that ran on the device, linked to its launch by the correlation id."""

    name: str
    category: str
    start_us: float
    duration_us: float
    correlation: int


class CommunicationSpan(NamedTuple):
    """A CPU-side collective or point-to-point operation (see `aitune.analysis.collectives`) and the bytes it moves."""

    name: str
    start_us: float
    duration_us: float
    thread: ThreadKey
    bytes: int | None  # None when the args carry no usable size
    bytes_from: str | None  # how its args give bytes (collectives.PARAM_COMMS, INPUTS), None when they cannot

    @property
    def end_us(self) -> float:
        return self.start_us + self.duration_us


@dataclass
class OpColumns:
    """CPU operator spans column by column: a trace holds ~10⁵ of them, and one object each would
    dominate the analysis time."""

    names: list[str] = field(default_factory=list)
    starts_us: list[float] = field(default_factory=list)
    durations_us: list[float] = field(default_factory=list)
    threads: list[ThreadKey] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.names)


@dataclass
class TraceEvents:
    """Everything analysis reads from one trace; lists are in trace order."""

    runs: list[Span] = field(default_factory=list)
    regions: list[Span] = field(default_factory=list)
    ops: OpColumns = field(default_factory=OpColumns)
    launches: list[Launch] = field(default_factory=list)
    device: list[DeviceActivity] = field(default_factory=list)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    annotations: list[Span] = field(default_factory=list)  # not aitune's: ProfilerStep#N, AITune 0.6's, the user's
    module_calls: list[Span] = field(default_factory=list)  # "nn.Module: <Class>_<k>" events of with_stack traces
    communication: list[CommunicationSpan] = field(default_factory=list)  # CPU-side; c10d ops are in ``ops`` too
    trace_kind: str = TRACE_KIND_AITUNE  # one of aitune.markers.TRACE_KINDS

    @property
    def has_device_data(self) -> bool:
        return bool(self.device)

    # Shared by the analyses of one finished read; `add` must not be called after they are taken.
    @cached_property
    def op_indices_by_thread(self) -> dict[ThreadKey, list[int]]:
        """Indices into ``ops`` grouped by thread, in trace order."""
        groups: dict[ThreadKey, list[int]] = defaultdict(list)
        for index, thread in enumerate(self.ops.threads):
            groups[thread].append(index)
        return dict(groups)

    @cached_property
    def device_time_by_correlation(self) -> dict[int, float]:
        """µs of device work each launch started, by correlation id."""
        totals: dict[int, float] = defaultdict(float)
        for activity in self.device:
            totals[activity.correlation] += activity.duration_us
        return dict(totals)

    @cached_property
    def communication_kernels(self) -> list[DeviceActivity]:
        """The device activities that are communication (NCCL kernels), in trace order."""
        return [activity for activity in self.device if activity.name.startswith(DEVICE_PREFIXES)]

    def add(
        self,
        category: str,
        name: str,
        start_us: float,
        duration_us: float,
        thread: ThreadKey,
        correlation: int | None,
        args: Any = None,
    ) -> None:
        """File one complete event by its category; categories analysis does not use are dropped.

        ``args`` (the event's, untrusted) are read for communication events only: their bytes.
        """
        if category in SPAN_CATEGORIES and name.startswith(CPU_PREFIXES):
            self._add_communication(name, start_us, duration_us, thread, args)
            if category == "user_annotation":
                return  # a backend's span of the transfer (gloo:all_reduce): not the user's annotation, not a region
        if name.startswith(SPAN_PREFIX) and category in SPAN_CATEGORIES:
            if name.startswith(REGION_SPAN_PREFIX):
                self.regions.append(Span(name, start_us, duration_us, thread))
            elif name.startswith(RUN_SPAN_PREFIX):
                self.runs.append(Span(name, start_us, duration_us, thread))
        elif category == "cpu_op":
            ops = self.ops
            ops.names.append(name)
            ops.starts_us.append(start_us)
            ops.durations_us.append(duration_us)
            ops.threads.append(thread)
        elif category == "user_annotation":
            self.annotations.append(Span(name, start_us, duration_us, thread))
        elif category == "python_function":
            if name.startswith(MODULE_CALL_PREFIX):
                self.module_calls.append(Span(name, start_us, duration_us, thread))
        elif correlation is None:
            return
        elif category in LAUNCH_CATEGORIES:
            self.launches.append(Launch(name, start_us, duration_us, thread, correlation))
        elif category in DEVICE_CATEGORIES:
            self.device.append(DeviceActivity(name, category, start_us, duration_us, correlation))

    def _add_communication(self, name: str, start_us: float, duration_us: float, thread: ThreadKey, args: Any) -> None:
        kind = communication_kind(name)
        bytes_from = kind.bytes_from if kind is not None else None
        moved = message_bytes(bytes_from, args) if bytes_from is not None else None
        self.communication.append(CommunicationSpan(name, start_us, duration_us, thread, moved, bytes_from))


def read_trace_events(trace: Mapping[str, Any]) -> TraceEvents:
    """Read a Chrome trace document (``{"traceEvents": [...], "aitune": {...}}``) into `TraceEvents`.

    One pass over the events; events other than complete ones ("ph": "X") are skipped. A trace that
    another tool wrote has its run and region markers translated into aitune's (see `detect_trace_kind`);
    one without any run marker comes back with no runs.

    The trace is untrusted: `ProfileError` names the first malformed complete event (a non-object, a
    non-numeric ``ts``, a name that is not a string, ...) or metadata that is not an object.
    """
    events = TraceEvents(metadata=_checked_metadata(trace.get(TRACE_METADATA_KEY) or {}))
    add = events.add
    raw_events = trace.get("traceEvents", ())
    raw = None
    # One try around the whole loop, not per event: this is the hot path, and the checks come from
    # the operations themselves (float(), int(), str methods, hashing the thread key).
    try:
        for raw in raw_events:
            if raw.get("ph") == "X":
                args = raw.get("args")
                correlation = args.get("correlation") if args else None
                add(
                    raw.get("cat", ""),
                    raw.get("name", ""),
                    float(raw["ts"]),
                    float(raw.get("dur", 0.0)),
                    (raw.get("pid"), raw.get("tid")),
                    int(correlation) if correlation is not None else None,
                    args,
                )
    except (AttributeError, KeyError, TypeError, ValueError, OverflowError):
        index = next(index for index, event in enumerate(raw_events) if event is raw)
        raise ProfileError(f"traceEvents[{index}] is malformed ({_what_is_wrong(raw)}); fix or drop it.") from None
    _check_threads(events)
    kind = detect_trace_kind(events)
    if kind in _FOREIGN_MARKERS:
        events.runs, events.regions = _FOREIGN_MARKERS[kind](events)
        events.trace_kind = kind
    return events


_METADATA_SHAPE = {
    **dict.fromkeys(("created_at", "aitune_version"), str),
    **dict.fromkeys(("config", "target", "input", "environment", "profiler"), dict),
    **dict.fromkeys(("regions", "warnings", "run_wall_times_us", "warmup_wall_times_us"), list),
}
_METADATA_ITEMS = {
    **dict.fromkeys(("regions", "warnings"), dict),
    **dict.fromkeys(("run_wall_times_us", "warmup_wall_times_us"), (int, float)),
}


def _checked_metadata(metadata: Any) -> Mapping[str, Any]:
    """The trace's aitune metadata when the keys analysis reads have the right types; `ProfileError` otherwise."""
    where = f"the trace's {TRACE_METADATA_KEY!r} metadata"
    if not isinstance(metadata, Mapping):
        raise ProfileError(f"{where} is {type(metadata).__name__}, not an object; re-export the trace.")
    for key, kind in _METADATA_SHAPE.items():
        value = metadata.get(key)
        item_kind = _METADATA_ITEMS.get(key)
        if value is not None and (
            not isinstance(value, kind) or (item_kind and not all(isinstance(item, item_kind) for item in value))
        ):
            raise ProfileError(f"{where}: {key!r} has the wrong type ({str(value)[:40]!r}); re-export the trace.")
    if not all(isinstance(region.get("id"), str) for region in metadata.get("regions") or ()):
        raise ProfileError(f"{where}: every entry of 'regions' needs a string 'id'; re-export the trace.")
    return metadata


_EVENT_FIELDS = (("name", str), ("cat", str), ("ts", (int, float)), ("dur", (int, float)), ("args", dict))


def _check_threads(events: TraceEvents) -> None:
    """`ProfileError` when a thread key cannot be hashed (a list ``pid``): analyses group by thread."""
    try:
        set(events.ops.threads)  # in C: a few ms for 10⁵ operators, against hashing each in the loop
        spans_lists = (events.runs, events.regions, events.annotations, events.module_calls, events.launches)
        for spans in (*spans_lists, events.communication):
            set(span.thread for span in spans)
    except TypeError:
        raise ProfileError("an event's 'pid' or 'tid' is a list or an object; use numbers or strings.") from None


def _what_is_wrong(raw: Any) -> str:
    """Which field of a malformed event is wrong, in words; only called once a read has failed."""
    if not isinstance(raw, dict):
        return f"an event must be an object, not {type(raw).__name__}"
    if "ts" not in raw:
        return "a complete event needs a 'ts'"
    for key, kinds in _EVENT_FIELDS:
        if key in raw and not isinstance(raw[key], kinds):
            return f"{key!r} is {type(raw[key]).__name__} {str(raw[key])[:40]!r}"
    for key in ("pid", "tid"):
        if isinstance(raw.get(key), (list, dict)):
            return f"{key!r} must be a number or a string"
    return f"args.correlation must be an integer, not {str(raw['args'].get('correlation'))[:40]!r}"


def detect_trace_kind(events: TraceEvents) -> str | None:
    """Which tool's run markers the events hold; None when they hold none.

    aitune's come first: its captures run under a profiler schedule, so they hold ProfilerStep#N
    spans too, and AITune 0.6 wraps each of its runs in one.
    """
    if events.runs or events.metadata:
        return TRACE_KIND_AITUNE
    names = {span.name for span in events.annotations}
    if AITUNE_06_RUN_SPAN in names:
        return TRACE_KIND_AITUNE_06
    if any(name.startswith(PROFILER_STEP_PREFIX) for name in names):
        return TRACE_KIND_TORCH
    return None


Markers = tuple[list[Span], list[Span]]
"""(runs, regions) named in aitune's vocabulary."""


def _aitune_06_markers(events: TraceEvents) -> Markers:
    """Runs from AITune's ``profiled_run`` spans, regions from its ``aitune.performance.<region id>`` spans."""
    runs = [span for span in events.annotations if span.name == AITUNE_06_RUN_SPAN]
    regions = [
        span._replace(name=region_span_name(span.name[len(AITUNE_06_SPAN_PREFIX) :]))
        for span in events.annotations
        if span.name.startswith(AITUNE_06_SPAN_PREFIX) and span.name != AITUNE_06_RUN_SPAN
    ]
    return _numbered(runs), _in_time_order(regions)


def _torch_profiler_markers(events: TraceEvents) -> Markers:
    """Runs from ``ProfilerStep#N``; regions from every other user annotation and from module calls."""
    runs = [span for span in events.annotations if span.name.startswith(PROFILER_STEP_PREFIX)]
    regions = [
        span._replace(name=region_span_name(user_span_region_id(span.name)))
        for span in (*events.annotations, *events.module_calls)
        if not span.name.startswith(PROFILER_STEP_PREFIX)
    ]
    return _numbered(runs), _in_time_order(regions)


_FOREIGN_MARKERS = {TRACE_KIND_AITUNE_06: _aitune_06_markers, TRACE_KIND_TORCH: _torch_profiler_markers}


def _numbered(runs: list[Span]) -> list[Span]:
    """Runs in time order, named ``aitune::run::<i>``: the i-th run recorded, whatever the step number."""
    return [span._replace(name=run_span_name(index)) for index, span in enumerate(_in_time_order(runs))]


def _in_time_order(spans: list[Span]) -> list[Span]:
    return sorted(spans, key=lambda span: span.start_us)
