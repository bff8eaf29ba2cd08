"""The events model: a Chrome trace read once into small frozen records (µs floats, no torch), its
operators, nine events in ten, as read-only numpy columns with their nesting found once per thread.

Only what analysis needs is kept: run and region spans, CPU operator spans, host-side launches of
device work, the device activities (kernels, copies, sets) they started, and the CPU-side
communication spans (`aitune.analysis.collectives`) with the bytes their args give, and the input
shapes of the operators with a work formula (`aitune.analysis.work.COUNTED`) — the only events
whose args are read beyond the correlation id.

Runs and regions are always named in aitune's vocabulary (`aitune.markers`), whichever tool wrote
the trace: the markers of NVIDIA AITune 0.6 and of a plain torch.profiler session are translated
once, after the read (see `detect_trace_kind`), so every analysis reads one model.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from itertools import compress
from types import MappingProxyType
from typing import Any

import numpy as np

from aitune.analysis.collectives import CPU_PREFIXES, DEVICE_PREFIXES, communication_kind, message_bytes
from aitune.analysis.event_records import (
    MAX_MEMORY_DEVICES,
    MEMORY_CATEGORY,
    MEMORY_EVENT_NAME,
    CommunicationSpan,
    DeviceActivity,
    Launch,
    MemoryEvent,
    memory_event,
)
from aitune.analysis.gc_pause import gc_paused
from aitune.analysis.intervals import order_array, parent_array
from aitune.analysis.membership import ThreadMembership, TreeEntry, region_tree, thread_membership
from aitune.analysis.span import Span, ThreadKey
from aitune.analysis.trace_checks import checked_metadata, what_is_wrong
from aitune.analysis.trace_kinds import FOREIGN_MARKERS, detect_trace_kind
from aitune.analysis.work import COUNTED, OpInputs, operator_inputs
from aitune.errors import ProfileError
from aitune.markers import (
    MODULE_CALL_PREFIX,
    REGION_SPAN_PREFIX,
    RUN_SPAN_PREFIX,
    SPAN_PREFIX,
    TRACE_KIND_AITUNE,
    TRACE_METADATA_KEY,
    span_region_id,
)

DEVICE_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
LAUNCH_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver"})
SPAN_CATEGORIES = frozenset({"user_annotation", "cpu_op"})
"""aitune's spans are user annotations, or CPU ops when opened through torch's fast record-function path."""


def frozen_array(values: Any, dtype: type) -> np.ndarray:
    """``values`` as a read-only numpy array: the model's columns cannot be changed once built."""
    array = np.array(values, dtype=dtype)
    array.flags.writeable = False
    return array


_NO_FLOATS = frozen_array((), np.float64)
_NO_INDICES = frozen_array((), np.intp)


class _EqualByValue:
    """Field-by-field equality that compares arrays by their values (a dataclass's own equality would
    ask an array for a single truth value): two readers of one trace build equal models."""

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(
            np.array_equal(mine, theirs) if isinstance(mine, np.ndarray) else mine == theirs
            for mine, theirs in ((getattr(self, item.name), getattr(other, item.name)) for item in fields(self))
        )

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True, eq=False)
class OpColumns(_EqualByValue):
    """CPU operator spans column by column: a trace holds ~10⁵ of them, and one object each would
    dominate the analysis time. Times are float64 arrays; ``name_codes`` numbers each operator's
    name by its position in ``distinct_names`` (names in order of first appearance), so tables of
    operators by name are sums over codes."""

    names: tuple[str, ...] = ()
    starts_us: np.ndarray = field(default_factory=lambda: _NO_FLOATS)
    durations_us: np.ndarray = field(default_factory=lambda: _NO_FLOATS)
    threads: tuple[ThreadKey, ...] = ()
    name_codes: np.ndarray = field(default_factory=lambda: _NO_INDICES)
    distinct_names: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.names)


def op_columns(
    names: Sequence[str], starts: Sequence[float], durations: Sequence[float], threads: Sequence[ThreadKey]
) -> OpColumns:
    """The frozen `OpColumns` of operators given as lists, their names coded once."""
    distinct = tuple(dict.fromkeys(names))
    code_of = {name: code for code, name in enumerate(distinct)}
    codes = np.fromiter(map(code_of.__getitem__, names), dtype=np.intp, count=len(names))
    codes.flags.writeable = False
    return OpColumns(
        tuple(names),
        frozen_array(starts, np.float64),
        frozen_array(durations, np.float64),
        tuple(threads),
        codes,
        distinct,
    )


@dataclass(frozen=True, eq=False)
class ThreadView(_EqualByValue):
    """One thread's share of the model, as indices into its sequences, each in trace order.

    Its operators are index and time arrays: ``ops`` their positions in the model's `OpColumns`, with
    their starts and durations. Their nesting is found once, here: ``op_order`` lists positions in
    ``ops`` with every parent before its children, ``op_parents`` the position of each one's innermost
    enclosing operator (-1 for a topmost one), both as `aitune.analysis.intervals` defines them.

    Which run and which region holds each span is found once, here too (`aitune.analysis.membership`),
    as positions in ``runs``, ``regions`` and ``ops`` (-1: none): ``op_runs`` and ``op_regions``, the
    run and innermost region span each operator started in; ``launch_runs``, ``launch_regions`` and
    ``launch_ops`` the same for each launch, and the innermost operator it started in; ``region_runs``
    the run each region span started in, ``region_order`` and ``region_parents`` the regions' nesting,
    ``region_depths`` how deep each nests (1: topmost), and ``region_nodes`` its node in the model's
    ``region_tree`` (-1 outside every run).
    """

    runs: tuple[int, ...] = ()
    regions: tuple[int, ...] = ()
    launches: tuple[int, ...] = ()
    ops: np.ndarray = field(default_factory=lambda: _NO_INDICES)
    op_starts_us: np.ndarray = field(default_factory=lambda: _NO_FLOATS)
    op_durations_us: np.ndarray = field(default_factory=lambda: _NO_FLOATS)
    op_order: np.ndarray = field(default_factory=lambda: _NO_INDICES)
    op_parents: np.ndarray = field(default_factory=lambda: _NO_INDICES)
    op_runs: np.ndarray = field(default_factory=lambda: _NO_INDICES)
    op_regions: np.ndarray = field(default_factory=lambda: _NO_INDICES)
    launch_runs: np.ndarray = field(default_factory=lambda: _NO_INDICES)
    launch_regions: np.ndarray = field(default_factory=lambda: _NO_INDICES)
    launch_ops: np.ndarray = field(default_factory=lambda: _NO_INDICES)
    region_runs: np.ndarray = field(default_factory=lambda: _NO_INDICES)
    region_order: np.ndarray = field(default_factory=lambda: _NO_INDICES)
    region_parents: np.ndarray = field(default_factory=lambda: _NO_INDICES)
    region_depths: np.ndarray = field(default_factory=lambda: _NO_INDICES)
    region_nodes: np.ndarray = field(default_factory=lambda: _NO_INDICES)


@dataclass(frozen=True)
class TraceEvents:
    """Everything analysis reads from one trace, indexed once and frozen (build it with `EventsBuilder`).

    Sequences are in trace order. ``threads`` holds each thread's `ThreadView` (threads in order of
    first appearance), with the run and region each span belongs to, ``region_tree`` the nodes of every
    run's region tree, and ``device_of`` the device work each launch started, by correlation id:
    analyses read these indexes and never regroup, refilter or search the sequences themselves.
    """

    runs: tuple[Span, ...] = ()
    regions: tuple[Span, ...] = ()
    ops: OpColumns = field(default_factory=OpColumns)
    launches: tuple[Launch, ...] = ()
    device: tuple[DeviceActivity, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    annotations: tuple[Span, ...] = ()  # not aitune's: ProfilerStep#N, AITune 0.6's, the user's
    module_calls: tuple[Span, ...] = ()  # "nn.Module: <Class>_<k>" events of with_stack traces
    communication: tuple[CommunicationSpan, ...] = ()  # CPU-side; c10d ops are in ``ops`` too
    communication_kernels: tuple[DeviceActivity, ...] = ()  # the device activities that are NCCL kernels
    memory: tuple[MemoryEvent, ...] = ()  # the profiler's allocations and frees (profile_memory), in trace order
    trace_kind: str = TRACE_KIND_AITUNE  # one of aitune.markers.TRACE_KINDS
    threads: Mapping[ThreadKey, ThreadView] = field(default_factory=dict)
    device_of: Mapping[int, tuple[DeviceActivity, ...]] = field(default_factory=dict)
    op_inputs: Mapping[int, OpInputs] = field(default_factory=dict)  # by position in ``ops``: counted operators'
    region_tree: tuple[TreeEntry, ...] = ()  # every run's region-tree nodes (`aitune.analysis.membership.region_tree`)

    @property
    def has_device_data(self) -> bool:
        return bool(self.device)

    def thread(self, key: ThreadKey) -> ThreadView:
        """The view of thread ``key``; an empty one for a thread the trace does not show."""
        return self.threads.get(key, _NO_THREAD)


_NO_THREAD = ThreadView()


class EventsBuilder:
    """Collects a trace's complete events (`add`), then indexes and freezes them once (`build`)."""

    def __init__(self) -> None:
        self.runs: list[Span] = []
        self.regions: list[Span] = []
        self.op_names: list[str] = []
        self.op_starts: list[float] = []
        self.op_durations: list[float] = []
        self.op_threads: list[ThreadKey] = []
        self.launches: list[Launch] = []
        self.device: list[DeviceActivity] = []
        self.annotations: list[Span] = []
        self.module_calls: list[Span] = []
        self.communication: list[CommunicationSpan] = []
        self.memory: list[MemoryEvent] = []
        self._memory_devices: set[str] = set()
        self.op_inputs: dict[int, OpInputs] = {}

    def add_op_inputs(self, index: int, args: Any) -> None:
        """Keep the recorded input shapes (``args``, untrusted) of operator ``index``, when they can be read."""
        inputs = operator_inputs(args)
        if inputs is not None:
            self.op_inputs[index] = inputs

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

        ``args`` (the event's, untrusted) are read for communication events (their bytes) and for
        the operators in `COUNTED` (their input shapes).
        """
        if category in SPAN_CATEGORIES and name.startswith(CPU_PREFIXES):
            self.add_communication(name, start_us, duration_us, thread, args)
            if category == "user_annotation":
                return  # a backend's span of the transfer (gloo:all_reduce): not the user's annotation, not a region
        if category == "cpu_op" and not name.startswith(SPAN_PREFIX):  # by far the most common: checked first
            if name in COUNTED:
                self.add_op_inputs(len(self.op_names), args)
            self.op_names.append(name)
            self.op_starts.append(start_us)
            self.op_durations.append(duration_us)
            self.op_threads.append(thread)
        elif name.startswith(SPAN_PREFIX) and category in SPAN_CATEGORIES:
            if name.startswith(REGION_SPAN_PREFIX):
                self.regions.append(Span(name, start_us, duration_us, thread))
            elif name.startswith(RUN_SPAN_PREFIX):
                self.runs.append(Span(name, start_us, duration_us, thread))
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

    def add_communication(self, name: str, start_us: float, duration_us: float, thread: ThreadKey, args: Any) -> None:
        """File the communication span of an event `add` files as one (its bytes read from ``args``)."""
        kind = communication_kind(name)
        bytes_from = kind.bytes_from if kind is not None else None
        moved = message_bytes(bytes_from, args) if bytes_from is not None else None
        self.communication.append(CommunicationSpan(name, start_us, duration_us, thread, moved, bytes_from))

    def add_memory(self, time_us: float, thread: ThreadKey, args: Any) -> None:
        """File one ``[memory]`` instant event from its ``args`` (untrusted; see `memory_event`); an event
        of a device past the first `MAX_MEMORY_DEVICES` is dropped."""
        event = memory_event(time_us, thread, args)
        if event is None:
            return
        if event.device not in self._memory_devices:
            if len(self._memory_devices) >= MAX_MEMORY_DEVICES:
                return
            self._memory_devices.add(event.device)
        self.memory.append(event)

    def build(self, metadata: Mapping[str, Any]) -> TraceEvents:
        """The frozen, indexed model of the events added, with ``metadata`` as its aitune metadata.

        A trace another tool wrote has its run and region markers translated into aitune's first (see
        `detect_trace_kind`). `ProfileError` when a thread key cannot be hashed (a list ``pid``).
        """
        runs, regions, kind = self.runs, self.regions, TRACE_KIND_AITUNE
        detected = detect_trace_kind(runs, self.annotations, metadata)
        if detected in FOREIGN_MARKERS:
            runs, regions = FOREIGN_MARKERS[detected](self.annotations, self.module_calls)
            kind = detected
        ops = op_columns(self.op_names, self.op_starts, self.op_durations, self.op_threads)
        try:
            threads, tree = _thread_views(ops, runs, regions, self)
        except TypeError:
            raise ProfileError("an event's 'pid' or 'tid' is a list or an object; use numbers or strings.") from None
        device_of: dict[int, list[DeviceActivity]] = defaultdict(list)
        for activity in self.device:
            device_of[activity.correlation].append(activity)
        return TraceEvents(
            runs=tuple(runs),
            regions=tuple(regions),
            ops=ops,
            launches=tuple(self.launches),
            device=tuple(self.device),
            metadata=metadata,
            annotations=tuple(self.annotations),
            module_calls=tuple(self.module_calls),
            communication=tuple(self.communication),
            communication_kernels=tuple(
                activity for activity in self.device if activity.name.startswith(DEVICE_PREFIXES)
            ),
            memory=tuple(self.memory),
            trace_kind=kind,
            threads=MappingProxyType(threads),
            device_of=MappingProxyType({key: tuple(work) for key, work in device_of.items()}),
            op_inputs=MappingProxyType(dict(self.op_inputs)),
            region_tree=tuple(tree),
        )


def _thread_views(
    ops: OpColumns, runs: list[Span], regions: list[Span], builder: EventsBuilder
) -> tuple[dict[ThreadKey, ThreadView], list[TreeEntry]]:
    """Each thread's `ThreadView`, threads in order of first appearance (operators', then the others'), and
    the nodes of every run's region tree (`aitune.analysis.membership.region_tree`)."""
    groups: dict[ThreadKey, dict[str, np.ndarray]] = {}
    for kind, threads in (
        ("ops", ops.threads),
        ("runs", [span.thread for span in runs]),
        ("regions", [span.thread for span in regions]),
        ("launches", [launch.thread for launch in builder.launches]),
    ):
        for thread, indices in _indices_by_thread(threads).items():
            lists = groups.get(thread)
            if lists is None:
                lists = groups[thread] = dict.fromkeys(("ops", "runs", "regions", "launches"), _NO_INDICES)
            lists[kind] = indices
    for spans in (builder.annotations, builder.module_calls, builder.communication, builder.memory):  # read by thread
        set(span.thread for span in spans)
    columns: dict[ThreadKey, dict[str, np.ndarray]] = {}
    memberships: dict[ThreadKey, ThreadMembership] = {}
    for thread, lists in groups.items():
        indices = lists["ops"]
        every = len(indices) == len(ops)  # every operator on this thread, the common case: no gather
        starts = ops.starts_us if every else ops.starts_us[indices]
        durations = ops.durations_us if every else ops.durations_us[indices]
        order = order_array(starts, durations)
        columns[thread] = {
            "ops": indices,
            "op_starts_us": starts,
            "op_durations_us": durations,
            "op_order": order,
            "op_parents": parent_array(starts, durations, order),
        }
        thread_runs = [runs[i] for i in lists["runs"].tolist()]
        thread_regions = [regions[i] for i in lists["regions"].tolist()]
        memberships[thread] = thread_membership(
            ([span.start_us for span in thread_runs], [span.duration_us for span in thread_runs]),
            ([span.start_us for span in thread_regions], [span.duration_us for span in thread_regions]),
            (starts, durations),
            order,
            [builder.launches[i].start_us for i in lists["launches"].tolist()],
        )
    tree, nodes = region_tree(
        [
            (
                groups[thread]["runs"].tolist(),
                [span_region_id(regions[i].name) for i in groups[thread]["regions"].tolist()],
                members,
            )
            for thread, members in memberships.items()
        ]
    )
    views: dict[ThreadKey, ThreadView] = {}
    for (thread, members), region_nodes in zip(memberships.items(), nodes, strict=True):
        found = {**columns[thread], **members._asdict(), "region_nodes": region_nodes}
        for column in found.values():
            column.flags.writeable = False
        lists = groups[thread]
        views[thread] = ThreadView(
            runs=tuple(lists["runs"].tolist()),
            regions=tuple(lists["regions"].tolist()),
            launches=tuple(lists["launches"].tolist()),
            **found,
        )
    return views, tree


def _indices_by_thread(threads: Sequence[ThreadKey]) -> dict[ThreadKey, np.ndarray]:
    """The positions in ``threads`` of each distinct thread, in order of first appearance.

    A capture's operators nearly all run on one thread: that case is found by hashing in C and takes no
    Python loop. `TypeError` when a key cannot be hashed.

    >>> {thread: indices.tolist() for thread, indices in _indices_by_thread([(1, 7), (1, 8), (1, 7)]).items()}
    {(1, 7): [0, 2], (1, 8): [1]}
    """
    distinct = dict.fromkeys(threads)
    if len(distinct) == 1:
        return {next(iter(distinct)): np.arange(len(threads), dtype=np.intp)}
    groups: dict[ThreadKey, list[int]] = {thread: [] for thread in distinct}
    for index, thread in enumerate(threads):
        groups[thread].append(index)
    return {thread: np.array(indices, dtype=np.intp) for thread, indices in groups.items()}


NOT_PLAIN_OP_PREFIXES = (SPAN_PREFIX, *CPU_PREFIXES)
"""Operators a fast reader (`read_trace_events`, `file_columns`) leaves to `EventsBuilder.add`, spans and
communication; the rest of the ``cpu_op`` events it appends straight to the builder's operator columns."""

EventColumns = tuple[Sequence[str], Sequence[str], Sequence[float], Sequence[float], Sequence[ThreadKey]]
"""Complete events as columns: categories, names, start µs, duration µs, threads."""


def file_columns(
    builder: EventsBuilder,
    columns: EventColumns,
    details: Callable[[int], tuple[Any, int | None]],
    op_args: Callable[[int], Any],
    memory: bool = False,
) -> None:
    """File events given as columns into ``builder`` exactly as `EventsBuilder.add` files each in turn,
    in C-level passes (a Python step per event costs about three times as much): the one filing rule
    of the typed JSON reader (`aitune.analysis.trace_json`) and the live one (`aitune.torch.performance.kineto`).

    Operators, nine events in ten, go to the columns in order; the rest through ``add`` in order, except
    that a communication operator (``c10d::allreduce_``), already in the columns, adds only its
    communication span. ``details(i)`` gives event i's args and correlation id and is asked only of
    events that are not plain operators; ``op_args(i)``, of the operators in `COUNTED` (their shapes).
    With ``memory`` the columns hold the profiler's instant events too (a live session's activities):
    its ``[memory]`` events are filed by `EventsBuilder.add_memory`, with the args ``details`` gives.
    """
    categories, names, starts, durations, threads = columns
    # One object per distinct name and thread, not one per event as a decoder makes them: the model
    # keeps both for every operator (about 170 bytes an operator, most of what it holds beyond the file).
    names = list(map(sys.intern, names))
    shared: dict[ThreadKey, ThreadKey] = {}
    threads = list(map(shared.setdefault, threads, threads))
    distinct = set(names)
    spans = {name for name in distinct if name.startswith(SPAN_PREFIX)}  # aitune's, opened as cpu ops
    special = {name for name in distinct if name.startswith(NOT_PLAIN_OP_PREFIXES)}
    operator = [category == "cpu_op" and name not in spans for category, name in zip(categories, names, strict=True)]
    offset = len(builder.op_names)
    builder.op_names.extend(compress(names, operator))
    builder.op_starts.extend(compress(starts, operator))
    builder.op_durations.extend(compress(durations, operator))
    builder.op_threads.extend(compress(threads, operator))
    if not COUNTED.isdisjoint(distinct):
        added = builder.op_names[offset:]
        positions = [offset + position for position, name in enumerate(added) if name in COUNTED]
        sources = [index for index in compress(range(len(names)), operator) if names[index] in COUNTED]
        for position, index in zip(positions, sources, strict=True):
            builder.add_op_inputs(position, op_args(index))
    for index in [index for index, name in enumerate(names) if name in special or not operator[index]]:
        category, name = categories[index], names[index]
        if memory and category == MEMORY_CATEGORY:
            if name == MEMORY_EVENT_NAME:
                builder.add_memory(starts[index], threads[index], details(index)[0])
            continue
        args, correlation = details(index)
        if operator[index]:
            builder.add_communication(name, starts[index], durations[index], threads[index], args)
        else:
            builder.add(category, name, starts[index], durations[index], threads[index], correlation, args)


@gc_paused()
def read_trace_events(trace: Mapping[str, Any]) -> TraceEvents:
    """Read a Chrome trace document (``{"traceEvents": [...], "aitune": {...}}``) into `TraceEvents`.

    One pass over the events; events other than complete ones ("ph": "X") are skipped, except the
    profiler's memory instant events (``[memory]``, "ph": "i"; one without a numeric ``ts`` or usable
    args is skipped, see `memory_event`). A trace that
    another tool wrote has its run and region markers translated into aitune's (see `detect_trace_kind`);
    one without any run marker comes back with no runs.

    The trace is untrusted: `ProfileError` names the first malformed complete event (a non-object, a
    non-numeric ``ts``, a name that is not a string, ...) or metadata that is not an object.
    """
    metadata = checked_metadata(trace.get(TRACE_METADATA_KEY) or {})
    builder = EventsBuilder()
    add = builder.add
    names, starts, durations, threads = builder.op_names, builder.op_starts, builder.op_durations, builder.op_threads
    raw_events = trace.get("traceEvents", ())
    raw = None
    # One try around the whole loop, not per event: this is the hot path, and the checks come from
    # the operations themselves (float(), int(), str methods, hashing the thread key). Operators,
    # nine events in ten, are filed inline: they carry no correlation id, and a call each costs a third.
    try:
        for raw in raw_events:
            if raw.get("ph") != "X":
                if raw.get("name") == MEMORY_EVENT_NAME and raw.get("ph") == "i" and _is_number(raw.get("ts")):
                    builder.add_memory(raw["ts"], (raw.get("pid"), raw.get("tid")), raw.get("args"))
                continue
            category = raw.get("cat", "")
            name = raw.get("name", "")
            if category == "cpu_op" and not name.startswith(NOT_PLAIN_OP_PREFIXES):
                if name in COUNTED:
                    builder.add_op_inputs(len(names), raw.get("args"))
                names.append(name)
                starts.append(float(raw["ts"]))
                durations.append(float(raw.get("dur", 0.0)))
                threads.append((raw.get("pid"), raw.get("tid")))
                continue
            args = raw.get("args")
            correlation = args.get("correlation") if args else None
            add(
                category,
                name,
                float(raw["ts"]),
                float(raw.get("dur", 0.0)),
                (raw.get("pid"), raw.get("tid")),
                int(correlation) if correlation is not None else None,
                args,
            )
    except (AttributeError, KeyError, TypeError, ValueError, OverflowError):
        index = next(index for index, event in enumerate(raw_events) if event is raw)
        raise ProfileError(f"traceEvents[{index}] is malformed ({what_is_wrong(raw)}); fix or drop it.") from None
    return builder.build(metadata)


def _is_number(value: Any) -> bool:
    return type(value) in (int, float) and value == value and abs(value) != float("inf")
