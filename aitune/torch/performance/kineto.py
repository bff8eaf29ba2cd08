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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torch.profiler import profile

from aitune.analysis.collectives import communication_kind
from aitune.analysis.events import (
    DEVICE_CATEGORIES,
    LAUNCH_CATEGORIES,
    NOT_PLAIN_OP_PREFIXES,
    EventsBuilder,
    TraceEvents,
    gc_paused,
)
from aitune.analysis.trace_json import trace_events_from_json
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
        return events_from_json_export(exported_json, metadata)
    if not hasattr(profiler.profiler.kineto_results, "trace_activities"):
        return events_from_exported_trace(profiler, metadata)
    builder = EventsBuilder()
    base_ns = (int(time.time()) // _PERIOD_S) * _PERIOD_S * 1_000_000_000
    add = builder.add
    names, starts, durations, threads = builder.op_names, builder.op_starts, builder.op_durations, builder.op_threads
    with_correlation = LAUNCH_CATEGORIES | DEVICE_CATEGORIES
    for activity in profiler.profiler.kineto_results.trace_activities():
        category = activity.type()
        name = activity.name()
        start_us = max(activity.timestamp() - base_ns, 0) / 1000
        duration_us = max(activity.duration(), 0) / 1000
        thread = (activity.device_id(), _thread_id(activity.resource_id()))
        if category == "cpu_op" and not name.startswith(NOT_PLAIN_OP_PREFIXES):  # nine in ten: filed inline
            names.append(name)
            starts.append(start_us)
            durations.append(duration_us)
            threads.append(thread)
            continue
        add(
            category,
            name,
            start_us,
            duration_us,
            thread,
            _correlation(activity) if category in with_correlation else None,
            _sized_args(activity, name),
        )
    return builder.build(metadata)


def events_from_exported_trace(profiler: profile, metadata: Mapping[str, Any]) -> TraceEvents:
    """The `TraceEvents` of a stopped profiler session read from its Chrome trace, exported to a temporary
    file first: the path for torch without kineto's activities (2.11, the lent GPU image's)."""
    with tempfile.TemporaryDirectory(prefix="aitune-trace-") as folder:
        path = Path(folder) / "trace.json"
        profiler.export_chrome_trace(str(path))
        return events_from_json_export(path.read_bytes(), metadata)


def events_from_json_export(data: bytes, metadata: Mapping[str, Any]) -> TraceEvents:
    """The `TraceEvents` of a session's exported Chrome trace JSON, with ``metadata`` as its aitune metadata."""
    return trace_events_from_json(data, _EXPORT_NAME, lambda json: parse_json(json, _EXPORT_NAME), metadata)


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
    try:
        args = json.loads("{" + (activity.metadata_json() or "") + "}")  # kineto writes the object's inside
    except ValueError:
        return None
    return args if isinstance(args, dict) else None


def _thread_id(resource_id: int) -> int:
    return 0 if resource_id == -(2**63) else abs(resource_id)
