"""Reading a finished profiler session straight into the torch-free events model.

The same events a Chrome trace export would write, without writing and parsing JSON (about 4×
cheaper per event): categories, names, threads, times and correlation ids are taken the way
torch's exporter takes them, so a saved trace re-analysed offline gives the same document.
That fast path reads kineto's activities through ``kineto_results.trace_activities()``, which
torch 2.11 (the lent GPU image's) lacks; there the session's Chrome trace is parsed instead.
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
    read_trace_events,
)
from aitune.markers import TRACE_METADATA_KEY
from aitune.report.io import read_trace

# torch's exporter writes timestamps relative to the start of the current 7,889,238-second period
# ("trimonth"), in µs with three decimals; using the same origin gives bit-identical floats.
_PERIOD_S = 7_889_238
_CORRELATION = re.compile(r'"correlation":\s*(\d+)')


@gc_paused()
def events_from_profiler(
    profiler: profile, metadata: Mapping[str, Any], exported_trace: Path | None = None
) -> TraceEvents:
    """The `TraceEvents` of a stopped profiler session, with ``metadata`` as its aitune metadata.

    ``exported_trace`` is where the session's Chrome trace was already written, if it was: torch
    saves a session's trace once, so the fallback reads that file instead of exporting again.
    """
    if not hasattr(profiler.profiler.kineto_results, "trace_activities"):
        return events_from_exported_trace(profiler, metadata, exported_trace)
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


def events_from_exported_trace(
    profiler: profile, metadata: Mapping[str, Any], exported_trace: Path | None = None
) -> TraceEvents:
    """The `TraceEvents` of a stopped profiler session read from its Chrome trace, as an offline re-analysis
    reads it (the slower path, for torch without the fast one): from ``exported_trace`` when the session's
    trace was already written there, else exported to a temporary file first."""
    if exported_trace is not None:
        trace = read_trace(exported_trace)
    else:
        with tempfile.TemporaryDirectory(prefix="aitune-trace-") as folder:
            path = Path(folder) / "trace.json"
            profiler.export_chrome_trace(str(path))
            trace = read_trace(path)
    return read_trace_events({**trace, TRACE_METADATA_KEY: metadata})


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
