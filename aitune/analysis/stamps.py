"""Clock-stamped spans: runs and regions timed without the profiler, and how they become trace events.

The wrappers stamp each region call with ``time.perf_counter_ns`` (`StampedSpan`). A lite capture
writes its stamps as the events of its trace (`stamped_trace`). A full capture that traces operators
in runs of their own keeps the stamps of its timed runs in its metadata (`TIMED_SPANS_KEY`, a
compact `stamp_table`) beside the profiler's events, and `timed_events` reads them back. Either way
the timed runs become the same ``user_annotation`` spans, analysed by the one attribution path, and
a saved trace re-analysed offline gives the live result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aitune.analysis.events import TraceEvents, read_trace_events
from aitune.errors import ProfileError
from aitune.markers import TRACE_METADATA_KEY

StampedSpan = tuple[str, int, int, int]
"""One stamped span: name, start and end (ns of ``time.perf_counter_ns``), thread id."""

TIMED_SPANS_KEY = "timed_spans"
"""The metadata key of a full capture's timed runs, when its operators were traced in other runs."""


def stamp_table(stamps: Sequence[StampedSpan]) -> dict[str, Any]:
    """``stamps`` as a compact JSON table: their distinct ``names``, and one ``[name index, thread,
    start µs, duration µs]`` row per span, in start order, µs from the earliest stamp.

    >>> stamp_table([("b", 3000, 5000, 7), ("a", 1000, 9000, 7)])
    {'names': ['a', 'b'], 'spans': [[0, 7, 0.0, 8.0], [1, 7, 2.0, 2.0]]}
    """
    ordered = sorted(stamps, key=lambda stamp: stamp[1])
    origin = ordered[0][1] if ordered else 0
    index: dict[str, int] = {}
    spans = [
        [index.setdefault(name, len(index)), thread, (start - origin) / 1000, (end - start) / 1000]
        for name, start, end, thread in ordered
    ]
    return {"names": list(index), "spans": spans}


def stamped_trace(stamps: Sequence[StampedSpan], metadata: Mapping[str, Any], pid: int) -> dict[str, Any]:
    """A Chrome trace document of ``stamps`` (µs from the earliest stamp) of process ``pid``, with
    ``metadata`` inside."""
    return {"traceEvents": _span_events(stamp_table(stamps), pid), TRACE_METADATA_KEY: dict(metadata)}


def timed_events(metadata: Mapping[str, Any]) -> TraceEvents | None:
    """The events of the timed runs ``metadata`` carries (`TIMED_SPANS_KEY`), with the rest of it as
    their metadata; None when it carries none (the profiler's runs are the timed ones).

    The metadata is untrusted: `ProfileError` when the table is not one `stamp_table` writes.
    """
    table = metadata.get(TIMED_SPANS_KEY)
    if table is None:
        return None
    rest = {key: value for key, value in metadata.items() if key != TIMED_SPANS_KEY}
    return read_trace_events({"traceEvents": _span_events(table, 0), TRACE_METADATA_KEY: rest})


def _span_events(table: Any, pid: int) -> list[dict[str, Any]]:
    names = table.get("names") if isinstance(table, Mapping) else None
    spans = table.get("spans") if isinstance(table, Mapping) else None
    if not (isinstance(names, list) and all(isinstance(name, str) for name in names) and isinstance(spans, list)):
        raise ProfileError(_malformed("it needs a list of string 'names' and a list of 'spans'"))
    try:
        return [
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": names[_index(name, len(names))],
                "ts": float(start),
                "dur": float(duration),
                "pid": pid,
                "tid": int(thread),
            }
            for name, thread, start, duration in spans
        ]
    except (TypeError, ValueError, IndexError, OverflowError):
        raise ProfileError(_malformed("every span must be [name index, thread, start µs, duration µs]")) from None


def _index(value: Any, count: int) -> int:
    if type(value) is not int or not 0 <= value < count:
        raise IndexError(value)
    return value


def _malformed(why: str) -> str:
    where = f"the trace's {TRACE_METADATA_KEY!r} metadata"
    return f"{where}: {TIMED_SPANS_KEY!r} is malformed ({why}); re-export the trace."
