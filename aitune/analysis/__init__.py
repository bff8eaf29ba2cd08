"""Torch-free analysis: Chrome-trace events in, per-run attribution, operator tables and warnings out."""

from aitune.analysis.attribution import AttributedRun, attribute_runs
from aitune.analysis.events import TraceEvents, read_trace_events

__all__ = ["AttributedRun", "TraceEvents", "attribute_runs", "read_trace_events"]
