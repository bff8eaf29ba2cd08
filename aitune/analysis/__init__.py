"""Torch-free analysis: Chrome-trace events in, per-run attribution, operator tables and warnings out.

The names below load their module on first use (PEP 562): a reader of documents imports the few
plain-Python modules it needs (`aitune.analysis.shares`, `aitune.analysis.statistics`) without the
events model and numpy.
"""

from __future__ import annotations

from aitune.lazy_exports import lazy_exports

_HOME_OF = {
    "AttributedRun": "attribution",
    "attribute_runs": "attribution",
    "TraceEvents": "events",
    "read_trace_events": "events",
}

__all__ = sorted(_HOME_OF)
__getattr__, __dir__ = lazy_exports(__name__, _HOME_OF, globals())
