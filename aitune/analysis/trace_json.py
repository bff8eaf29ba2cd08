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

from aitune.analysis.events import (
    MEMORY_EVENT_NAME,
    EventsBuilder,
    TraceEvents,
    check_trace,
    checked_metadata,
    file_columns,
    read_trace_events,
)
from aitune.analysis.gc_pause import gc_paused
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
    traceEvents: list[_Event]
    metadata: msgspec.Raw = msgspec.field(default=_NOTHING, name=TRACE_METADATA_KEY)


_DECODER = msgspec.json.Decoder(_Trace)

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
    data: bytes, name: str, parse: Callable[[bytes], Any], metadata: Mapping[str, Any] | None = None
) -> TraceEvents:
    """The `TraceEvents` of the Chrome trace JSON ``data`` (already gunzipped), as
    `read_trace_events` gives them for the parsed document; `ProfileError` naming ``name`` when it is
    not a trace or holds a malformed event.

    ``parse`` is the caller's bounded JSON reader (its size and depth limits, ``name`` in its errors):
    it reads the aitune metadata, and the whole document when the typed records cannot hold it.
    ``metadata``, when given, is the aitune metadata instead of the document's (a live session's,
    known before its export). An operator's args are skipped unread, however deep they nest.

    >>> data = b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}]}'
    >>> trace_events_from_json(data, "t.json", parse=None).ops.names
    ('aten::mm',)
    """
    check_event_count(data, name)
    try:
        trace = _DECODER.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        trace = None
    if trace is not None:
        if metadata is None:
            metadata = parse(bytes(trace.metadata)) if trace.metadata is not _NOTHING else None
        # Deep args of an event that is not an operator: the general reader refuses them in one sentence.
        with _naming(name), contextlib.suppress(_NotTyped, RecursionError):
            checked = checked_metadata(metadata or {})
            builder = _typed(trace)
            del trace  # every record is filed: the model is built without them, at half the peak memory
            return builder.build(checked)
    document = check_trace(parse(data), name)
    if metadata is not None:
        document = {**document, TRACE_METADATA_KEY: metadata}
    with _naming(name):
        return read_trace_events(document)


@contextlib.contextmanager
def _naming(name: str) -> Iterator[None]:
    """Errors of the event reader, which cannot know the file, prefixed with its ``name``."""
    try:
        yield
    except ProfileError as error:
        raise ProfileError(f"{name}: {error}") from None


def _typed(trace: _Trace) -> EventsBuilder:
    """The typed records filed into a builder by `file_columns` (the complete events) and
    `EventsBuilder.add_memory` (the ``[memory]`` instant events); `_NotTyped` for an event the general
    reader must judge (no ``ts``, args that are not an object, a correlation id that is not an integer)."""
    complete = [event for event in trace.traceEvents if event.ph == "X"]
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

    builder = EventsBuilder()
    file_columns(builder, (*columns, list(map(_THREAD, complete))), details, op_args)
    for event in trace.traceEvents:
        if event.ph == "i" and event.name == MEMORY_EVENT_NAME and event.ts is not None:
            builder.add_memory(event.ts, (event.pid, event.tid), _args(event))
    return builder


def _args(event: _Event) -> Any:
    """An event's args, decoded only when asked for; None when it has none."""
    return msgspec.json.decode(event.args) if event.args is not _NOTHING else None


_NAME, _CATEGORY, _START = attrgetter("name"), attrgetter("cat"), attrgetter("ts")
_DURATION, _THREAD = attrgetter("dur"), attrgetter("pid", "tid")
