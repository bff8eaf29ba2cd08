"""Reading a finished profiler session straight into the torch-free events model.

The same events a Chrome trace export would write, without writing and parsing JSON: categories,
names, threads, times and correlation ids are taken the way torch's exporter takes them, so a saved
trace re-analysed offline gives the same document. When the trace is written anyway, its JSON is
read instead (exporting costs about what reading the activities does, so the export paid once is
the cheaper source); so it is on torch 2.11 (the lent GPU image's), which lacks
``kineto_results.trace_activities()``.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Callable, Mapping
from operator import methodcaller
from pathlib import Path
from typing import Any

import numpy as np
from torch.profiler import profile

from aitune.analysis.collectives import communication_kind
from aitune.analysis.event_records import MEMORY_CATEGORY
from aitune.analysis.events import DEVICE_CATEGORIES, LAUNCH_CATEGORIES, EventsBuilder, TraceEvents, file_columns
from aitune.analysis.gc_pause import gc_paused
from aitune.analysis.trace_json import trace_events_from_json
from aitune.analysis.work import COUNTED
from aitune.report.io import parse_json

# torch's exporter writes timestamps relative to the start of the current 7,889,238-second period
# ("trimonth"), in µs with three decimals; using the same origin gives bit-identical floats.
_PERIOD_S = 7_889_238
_CORRELATION = re.compile(r'"correlation":\s*(\d+)')


@gc_paused()
def events_from_profiler(
    profiler: profile, metadata: Mapping[str, Any], exported_json: bytes | None = None
) -> TraceEvents:
    """The `TraceEvents` of a stopped profiler session, with ``metadata`` as its aitune metadata.

    ``exported_json`` is the session's Chrome trace JSON when it was already exported (torch exports a
    session once): the events are read from it (`events_from_json_export`), which costs what reading
    the activities does once the export is paid, and is what an offline re-analysis of the file reads.
    """
    if exported_json is not None:
        return events_from_json_export(lambda: exported_json, metadata)
    if not reads_activities(profiler):
        return events_from_exported_trace(profiler, metadata)
    activities = profiler.profiler.kineto_results.trace_activities()
    count = len(activities)
    # Each field in one C-level map over the activities, then the arithmetic in numpy: a Python step
    # per activity cost about as much as torch's bindings themselves.
    categories = list(map(_TYPE, activities))
    names = list(map(_NAME, activities))
    base_ns = (int(time.time()) // _PERIOD_S) * _PERIOD_S * 1_000_000_000
    stamps_ns = np.fromiter(map(_TIMESTAMP, activities), dtype=np.int64, count=count)
    starts = (np.maximum(stamps_ns - base_ns, 0) / 1000).tolist()  # ns below 2⁵³: as exact as int / 1000
    durations = (np.maximum(np.fromiter(map(_DURATION, activities), dtype=np.int64, count=count), 0) / 1000).tolist()
    resources = np.fromiter(map(_RESOURCE_ID, activities), dtype=np.int64, count=count)
    thread_ids = np.where(resources == _NO_RESOURCE, 0, np.abs(resources)).tolist()
    threads = list(zip(map(_DEVICE_ID, activities), thread_ids, strict=True))
    builder = EventsBuilder()
    # the args filed for most events that have any: memory events' and counted operators' (their shapes)
    wanted = [
        index
        for index, (category, name) in enumerate(zip(categories, names, strict=True))
        if category == MEMORY_CATEGORY or name in COUNTED
    ]
    batch = _batched_args([activities[index] for index in wanted])
    parsed = dict(zip(wanted, batch, strict=True)) if batch is not None else {}

    def args(index: int) -> dict[str, Any] | None:
        found = parsed.get(index, _UNREAD)
        return _metadata_args(activities[index]) if found is _UNREAD else found

    def details(index: int) -> tuple[Any, int | None]:
        category = categories[index]
        if category == MEMORY_CATEGORY:  # profile_memory's allocations and frees, args as the export writes them
            return args(index), None
        correlation = _correlation(activities[index]) if category in _WITH_CORRELATION else None
        return _sized_args(activities[index], names[index]), correlation

    columns = (categories, names, starts, durations, threads)
    file_columns(builder, columns, details, args, memory=True)
    return builder.build(metadata)


def reads_activities(profiler: profile) -> bool:
    """Whether this torch hands a stopped session's activities over (2.13 does, 2.11 only exports them)."""
    return hasattr(profiler.profiler.kineto_results, "trace_activities")


_WITH_CORRELATION = LAUNCH_CATEGORIES | DEVICE_CATEGORIES

_TYPE, _NAME, _TIMESTAMP, _DURATION = (methodcaller(field) for field in ("type", "name", "timestamp", "duration"))
_DEVICE_ID, _RESOURCE_ID = methodcaller("device_id"), methodcaller("resource_id")
_METADATA_JSON = methodcaller("metadata_json")
_NO_RESOURCE = -(2**63)
"""The resource id kineto gives an activity without a thread; the exported trace shows tid 0."""


def events_from_exported_trace(profiler: profile, metadata: Mapping[str, Any]) -> TraceEvents:
    """The `TraceEvents` of a stopped profiler session read from its Chrome trace, exported to a temporary
    file first: the path for torch without kineto's activities (2.11, the lent GPU image's)."""
    with tempfile.TemporaryDirectory(prefix="aitune-trace-") as folder:
        path = Path(folder) / "trace.json"
        profiler.export_chrome_trace(str(path))
        return events_from_json_export(path.read_bytes, metadata)


def events_from_json_export(load: Callable[[], bytes], metadata: Mapping[str, Any]) -> TraceEvents:
    """The `TraceEvents` of a session's exported Chrome trace JSON (``load`` reads it), with ``metadata`` as its
    aitune metadata."""
    return trace_events_from_json(load, _EXPORT_NAME, lambda json: parse_json(json, _EXPORT_NAME), metadata)


_EXPORT_NAME = "the profiler's exported trace"


def _correlation(activity: Any) -> int:
    """The correlation id the exported trace shows in ``args.correlation`` (from the activity's metadata)."""
    found = _CORRELATION.search(activity.metadata_json() or "")
    return int(found.group(1)) if found else activity.correlation_id()


def _sized_args(activity: Any, name: str) -> dict[str, Any] | None:
    """The args the exported trace shows, for the communication events whose args give bytes; None for the rest."""
    kind = communication_kind(name)
    if kind is None or kind.bytes_from is None:
        return None
    return _metadata_args(activity)


_UNREAD = object()


def _batched_args(activities: list[Any]) -> list[dict[str, Any]] | None:
    """Each activity's args (`_metadata_args`) from one parse of all their texts joined: a parse per
    event cost about twice as much (5,140 memory events: 14.6 ms against 6.3). None when the joined text
    does not give one object per activity (one text that does not parse): the caller then parses each."""
    if not activities:
        return []
    try:  # kineto writes each object's inside; a text that is not a string fails the join
        args = json.loads("[{" + "},{".join(map(_METADATA_JSON, activities)) + "}]")
    except (TypeError, ValueError):
        return None
    return args if len(args) == len(activities) and set(map(type, args)) == {dict} else None


def _metadata_args(activity: Any) -> dict[str, Any] | None:
    """The args the exported trace shows for ``activity``; None when kineto's text does not parse."""
    try:
        args = json.loads("{" + (activity.metadata_json() or "") + "}")  # kineto writes the object's inside
    except ValueError:
        return None
    return args if isinstance(args, dict) else None
