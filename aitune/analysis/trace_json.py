"""A Chrome trace's JSON decoded straight into the events model, without a Python dict per event.

A trace spends ~250 bytes of JSON on an event, and nine events in ten are operators whose args
analysis never reads. Decoding into typed records (msgspec) that leave those args unread costs a
third of building a dict per event and reading it back: 0.21 s against 0.64 s of CPU for the
263,111 events of `benchmarks/analysis_speed.py`'s trace, and the loop over the records half as much.

This is a fast path, never a second meaning: a document the typed records cannot hold (a field of
another type, an event that is not an object, invalid JSON) is parsed whole and read by
`aitune.analysis.events.read_trace_events`, whose leniency and one-sentence errors are the definition.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from operator import attrgetter
from typing import Any

import msgspec

from aitune.analysis.event_records import MEMORY_EVENT_NAME
from aitune.analysis.events import EventsBuilder, TraceEvents, file_columns, read_trace_events
from aitune.analysis.gc_pause import gc_paused
from aitune.analysis.trace_checks import check_trace, checked_metadata
from aitune.errors import ProfileError
from aitune.markers import TRACE_METADATA_KEY

_NOTHING = msgspec.Raw(b"null")


class _Event(msgspec.Struct, gc=False):  # holds no containers: the collector need not track 10⁵ of them
    """The fields of one trace event analysis reads; ``args`` is kept as undecoded JSON."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    ts: float | None = None
    dur: float = 0.0
    pid: int | float | str | None = None
    tid: int | float | str | None = None
    args: msgspec.Raw = _NOTHING


class _Trace(msgspec.Struct):
    """A trace's events left as undecoded JSON, each a view of the file's bytes, decoded a chunk at a time."""

    traceEvents: list[msgspec.Raw]
    metadata: msgspec.Raw = msgspec.field(default=_NOTHING, name=TRACE_METADATA_KEY)


_TRACE = msgspec.json.Decoder(_Trace)
_EVENTS = msgspec.json.Decoder(list[_Event])

CHUNK_EVENTS = 2048
"""Events decoded into records at a time: a whole trace's records take twice its JSON (~350 bytes an
event), a chunk's stay in the processor's cache and are dropped once filed."""

MAX_TRACE_EVENTS = 2_000_000
"""Most events a trace may hold: 20 times the 10⁵ of a long capture, ~400 MB of JSON. Counted before
any is built (`check_event_count`), so a small gzip of 10⁷ tiny events is refused in a second, not after
gigabytes of records."""


def check_event_count(data: bytes, name: str) -> None:
    """`ProfileError` naming ``name`` when the trace JSON ``data`` may hold more than `MAX_TRACE_EVENTS` events.

    Every event is an object, and most of a torch trace's carry an ``args`` object too: ``{`` counted in C
    is an upper bound on the events, and on the records the typed reader builds, at twice the limit.
    """
    objects = data.count(b"{")
    if objects > 2 * MAX_TRACE_EVENTS:
        raise ProfileError(
            f"{name} holds up to {objects:,} objects (events and their args), over the limit of "
            f"{MAX_TRACE_EVENTS:,} events; capture fewer runs, or trace the operators of fewer (--operator-runs)."
        )


class _NotTyped(Exception):
    """An event the fast path cannot file as the general reader would: the general reader takes the document."""


@gc_paused()
def trace_events_from_json(
    load: Callable[[], bytes], name: str, parse: Callable[[bytes], Any], metadata: Mapping[str, Any] | None = None
) -> TraceEvents:
    """The `TraceEvents` of the Chrome trace JSON that ``load`` gives (already gunzipped), as
    `read_trace_events` gives them for the parsed document; `ProfileError` naming ``name`` when it is
    not a trace or holds a malformed event.

    The JSON is read in one pass of the decoder, a chunk of `CHUNK_EVENTS` events at a time, each filed
    and dropped before the next is decoded; this reader holds the only reference to the bytes ``load``
    gives, and drops them once every event is filed, before the model is indexed: the peak stays under
    twice the JSON. ``parse`` is the caller's bounded JSON reader (its size and depth limits, ``name``
    in its errors): it reads the aitune metadata, and the whole document when the typed records cannot
    hold it. ``metadata``, when given, is the aitune metadata instead of the document's (a live
    session's, known before its export). An operator's args are skipped unread, however deep they nest.

    >>> data = b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}]}'
    >>> trace_events_from_json(lambda: data, "t.json", parse=None).ops.names
    ('aten::mm',)
    """
    data = load()
    check_event_count(data, name)
    filed = _filed(data, name, parse, metadata)
    if filed is not None:
        del data  # the records are filed: the model is indexed without the file's bytes
        builder, checked = filed
        with _naming(name):
            return builder.build(checked)
    document = check_trace(parse(data), name)
    del data
    if metadata is not None:
        document = {**document, TRACE_METADATA_KEY: metadata}
    with _naming(name):
        return read_trace_events(document)


def _filed(
    data: bytes, name: str, parse: Callable[[bytes], Any], metadata: Mapping[str, Any] | None
) -> tuple[EventsBuilder, Mapping[str, Any]] | None:
    """The builder every event of the trace JSON ``data`` is filed into, with the checked aitune metadata;
    None when the typed records cannot hold the document and the general reader must judge it."""
    try:
        trace = _TRACE.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return None
    if metadata is None:
        metadata = parse(bytes(trace.metadata)) if trace.metadata is not _NOTHING else None
    builder = EventsBuilder()
    # Deep args of an event that is not an operator: the general reader refuses them in one sentence.
    with _naming(name), contextlib.suppress(_NotTyped, RecursionError):
        checked = checked_metadata(metadata or {})
        events = trace.traceEvents
        for start in range(0, len(events), CHUNK_EVENTS):
            _file(builder, _decoded(b",".join(events[start : start + CHUNK_EVENTS])))
        return builder, checked
    return None


def _decoded(events: bytes) -> list[_Event]:
    """The records of the events JSON ``events`` (comma-separated objects); `_NotTyped` when they cannot hold them."""
    try:
        return _EVENTS.decode(b"[%b]" % events)
    except (msgspec.ValidationError, msgspec.DecodeError):
        raise _NotTyped from None


@contextlib.contextmanager
def _naming(name: str) -> Iterator[None]:
    """Errors of the event reader, which cannot know the file, prefixed with its ``name``."""
    try:
        yield
    except ProfileError as error:
        raise ProfileError(f"{name}: {error}") from None


def _file(builder: EventsBuilder, events: list[_Event]) -> None:
    """File the typed records ``events`` into ``builder`` by `file_columns` (the complete events) and
    `EventsBuilder.add_memory` (the ``[memory]`` instant events); `_NotTyped` for an event the general
    reader must judge (no ``ts``, args that are not an object, a correlation id that is not an integer)."""
    complete = [event for event in events if event.ph == "X"]
    starts = list(map(_START, complete))
    if None in starts:
        raise _NotTyped
    columns = (list(map(_CATEGORY, complete)), list(map(_NAME, complete)), starts, list(map(_DURATION, complete)))

    def details(index: int) -> tuple[Any, int | None]:
        args = _args(complete[index])
        if args is not None and not isinstance(args, dict):
            raise _NotTyped
        correlation = args.get("correlation") if args else None
        if correlation is not None and type(correlation) is not int:
            raise _NotTyped
        return args, correlation

    def op_args(index: int) -> Any:
        with contextlib.suppress(msgspec.DecodeError):  # unreadable shapes: the operator goes uncounted
            return _args(complete[index])
        return None

    file_columns(builder, (*columns, list(map(_THREAD, complete))), details, op_args)
    for event in events:
        if event.ph == "i" and event.name == MEMORY_EVENT_NAME and event.ts is not None:
            builder.add_memory(event.ts, (event.pid, event.tid), _args(event))


def _args(event: _Event) -> Any:
    """An event's args, decoded only when asked for; None when it has none."""
    return msgspec.json.decode(event.args) if event.args is not _NOTHING else None


_NAME, _CATEGORY, _START = attrgetter("name"), attrgetter("cat"), attrgetter("ts")
_DURATION, _THREAD = attrgetter("dur"), attrgetter("pid", "tid")
