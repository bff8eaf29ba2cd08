"""The lite capture's evidence: clock-stamped run and region spans written as a Chrome trace.

The stamps become the same trace document a profiler session exports (complete ``user_annotation``
events under aitune's span names, the capture's metadata under ``aitune``), so the lite document is
derived by the one attribution path, and the saved trace re-analysed offline gives the same result.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from aitune.markers import TRACE_METADATA_KEY
from aitune.torch.performance.instrument import StampedSpan


def stamped_trace(stamps: Sequence[StampedSpan], metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A Chrome trace document of ``stamps`` (µs from the earliest stamp) with ``metadata`` inside."""
    origin = min((stamp[1] for stamp in stamps), default=0)
    pid = os.getpid()
    events = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": name,
            "ts": (start - origin) / 1000,
            "dur": (end - start) / 1000,
            "pid": pid,
            "tid": thread,
        }
        for name, start, end, thread in sorted(stamps, key=lambda stamp: stamp[1])
    ]
    return {"traceEvents": events, TRACE_METADATA_KEY: dict(metadata)}
