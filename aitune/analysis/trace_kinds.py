"""Which tool wrote a trace, and its run and region markers in aitune's names: aitune's own, NVIDIA AITune
0.6's ``profiled_run`` and ``aitune.performance.<id>`` spans, or a plain torch.profiler session's
``ProfilerStep#N`` steps, annotations and module calls."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aitune.analysis.span import Span
from aitune.markers import (
    AITUNE_06_RUN_SPAN,
    AITUNE_06_SPAN_PREFIX,
    PROFILER_STEP_PREFIX,
    TRACE_KIND_AITUNE,
    TRACE_KIND_AITUNE_06,
    TRACE_KIND_TORCH,
    region_span_name,
    run_span_name,
    user_span_region_id,
)


def detect_trace_kind(runs: Sequence[Span], annotations: Sequence[Span], metadata: Mapping[str, Any]) -> str | None:
    """Which tool's run markers a trace holds (its aitune ``runs``, other ``annotations``, aitune
    ``metadata``); None when it holds none.

    aitune's come first: its captures run under a profiler schedule, so they hold ProfilerStep#N
    spans too, and AITune 0.6 wraps each of its runs in one.
    """
    if runs or metadata:
        return TRACE_KIND_AITUNE
    names = {span.name for span in annotations}
    if AITUNE_06_RUN_SPAN in names:
        return TRACE_KIND_AITUNE_06
    if any(name.startswith(PROFILER_STEP_PREFIX) for name in names):
        return TRACE_KIND_TORCH
    return None


Markers = tuple[list[Span], list[Span]]
"""(runs, regions) named in aitune's vocabulary."""


def _aitune_06_markers(annotations: Sequence[Span], module_calls: Sequence[Span]) -> Markers:
    """Runs from AITune's ``profiled_run`` spans, regions from its ``aitune.performance.<region id>`` spans."""
    runs = [span for span in annotations if span.name == AITUNE_06_RUN_SPAN]
    regions = [
        span._replace(name=region_span_name(span.name[len(AITUNE_06_SPAN_PREFIX) :]))
        for span in annotations
        if span.name.startswith(AITUNE_06_SPAN_PREFIX) and span.name != AITUNE_06_RUN_SPAN
    ]
    return _numbered(runs), _in_time_order(regions)


def _torch_profiler_markers(annotations: Sequence[Span], module_calls: Sequence[Span]) -> Markers:
    """Runs from ``ProfilerStep#N``; regions from every other user annotation and from module calls."""
    runs = [span for span in annotations if span.name.startswith(PROFILER_STEP_PREFIX)]
    regions = [
        span._replace(name=region_span_name(user_span_region_id(span.name)))
        for span in (*annotations, *module_calls)
        if not span.name.startswith(PROFILER_STEP_PREFIX)
    ]
    return _numbered(runs), _in_time_order(regions)


FOREIGN_MARKERS = {TRACE_KIND_AITUNE_06: _aitune_06_markers, TRACE_KIND_TORCH: _torch_profiler_markers}


def _numbered(runs: list[Span]) -> list[Span]:
    """Runs in time order, named ``aitune::run::<i>``: the i-th run recorded, whatever the step number."""
    return [span._replace(name=run_span_name(index)) for index, span in enumerate(_in_time_order(runs))]


def _in_time_order(spans: list[Span]) -> list[Span]:
    return sorted(spans, key=lambda span: span.start_us)
