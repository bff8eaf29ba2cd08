"""The residual of a run broken into causes: what the profiler saw outside every region.

- ``synchronization``: host reads of tensor values (``.item()``, ``.tolist()``, ``nonzero``) and
  explicit synchronize calls — on a GPU each one stalls the host until the device catches up;
- ``memory_copy``: tensor copies and device transfers (``.to()``, ``copy_``, ``cudaMemcpy*``);
- ``communication`` (only in a trace that holds communication): the residual's time with a
  collective or point-to-point operation in flight (`aitune.analysis.communication`); an operator
  running meanwhile gives it only the time outside that;
- ``tensor_ops``: every other operator run between modules (pipeline math, scheduler steps);
- ``python``: the rest — time in which no operator ran (Python glue, framework overhead).

Only the topmost operators outside every region count, so nothing is counted twice, and the
causes add up to the CPU residual. Regions that span the run (``generate``) are looked through:
the residual lies at the level below them, so their self time (sampling, cache handling) is
explained by cause too.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from aitune.analysis.attribution import AttributedRun
from aitune.analysis.collectives import is_communication
from aitune.analysis.events import Span, ThreadView, TraceEvents
from aitune.analysis.intervals import Interval, covered_within
from aitune.analysis.shares import fraction
from aitune.markers import span_region_id, span_run_index

CAUSES = ("synchronization", "memory_copy", "tensor_ops", "python")
"""The causes of every full capture's residual; a trace with communication adds `COMMUNICATION`."""
COMMUNICATION = "communication"
SYNC_OPERATORS = frozenset({"aten::item", "aten::_local_scalar_dense", "aten::nonzero", "aten::tolist"})
COPY_OPERATORS = frozenset({"aten::to", "aten::_to_copy", "aten::copy_"})


@dataclass
class ResidualCauses:
    """CPU µs of one run's residual, by cause."""

    known_us: dict[str, float] = field(default_factory=lambda: dict.fromkeys(CAUSES[:-1], 0.0))

    def to_dict(self, run: AttributedRun) -> dict[str, dict[str, float]]:
        """Each cause as µs and fraction of the run; ``python`` is what the other causes leave."""
        residual_us = run.residual()["cpu_time_us"]
        total_known = sum(self.known_us.values())
        scale = residual_us / total_known if total_known > residual_us else 1.0  # rounding may overshoot a hair
        known = {cause: us * scale for cause, us in self.known_us.items()}
        known["python"] = max(0.0, residual_us - sum(known.values()))
        return {
            cause: {"cpu_time_us": us, "cpu_time_fraction": fraction(us, run.cpu_time_us)}
            for cause, us in known.items()
        }


def operator_cause(name: str) -> str:
    """The cause an operator outside every region stands for."""
    if is_communication(name):
        return COMMUNICATION
    if name in SYNC_OPERATORS or "Synchronize" in name:
        return "synchronization"
    if name in COPY_OPERATORS or "Memcpy" in name:
        return "memory_copy"
    return "tensor_ops"


def residual_causes(
    events: TraceEvents,
    spanning: Collection[str] = (),
    in_flight: Sequence[Interval] = (),
    communication_us: Mapping[int, float] | None = None,
) -> dict[int, ResidualCauses]:
    """For each run index, its residual CPU time by cause (before ``python`` is derived).

    ``spanning``: the regions that span the run (see `spanning_regions`), whose spans do not count as regions.
    ``communication_us``: each run's residual communication (`aitune.analysis.communication`), None when the trace
    has none; ``in_flight`` (merged intervals) is when it was in flight, time the other causes do not get.
    """
    causes: dict[int, ResidualCauses] = {span_run_index(run.name): ResidualCauses() for run in events.runs}
    if communication_us is not None:
        for index, residual in causes.items():
            residual.known_us[COMMUNICATION] = communication_us.get(index, 0.0)
    for view in events.threads.values():
        runs = [events.runs[i] for i in view.runs]
        in_region = _in_counted_region(events, view, spanning)
        outside = ~in_region[view.op_regions]
        parent_of = view.op_parents
        top = np.flatnonzero(outside & ((parent_of < 0) | ~outside[np.maximum(parent_of, 0)]))  # topmost of them
        names = events.ops.names
        for index, run, start, duration in zip(
            view.ops[top].tolist(),
            view.op_runs[top].tolist(),
            view.op_starts_us[top].tolist(),
            view.op_durations_us[top].tolist(),
            strict=True,
        ):
            cause = operator_cause(names[index])
            if run >= 0 and cause != COMMUNICATION:  # communication is counted by time in flight
                overlap = covered_within(in_flight, start, start + duration) if in_flight else 0.0
                causes[span_run_index(runs[run].name)].known_us[cause] += duration - overlap
        _add_bare_runtime_calls(events, view, runs, in_region, causes, in_flight)
    return causes


def _in_counted_region(events: TraceEvents, view: ThreadView, spanning: Collection[str]) -> np.ndarray:
    """Whether a point in each region span of ``view`` lies in a region that is not ``spanning`` (that span or one
    enclosing it), then False for a point outside every region: index it with a membership column (-1 last)."""
    inside = np.ones(len(view.regions) + 1, dtype=bool)
    inside[-1] = False
    if spanning:
        parent_of = view.region_parents.tolist()
        for index in view.region_order.tolist():  # parents first
            parent = parent_of[index]
            own = span_region_id(events.regions[view.regions[index]].name) not in spanning
            inside[index] = own or (parent >= 0 and bool(inside[parent]))
    return inside


def _add_bare_runtime_calls(
    events: TraceEvents,
    view: ThreadView,
    runs: Sequence[Span],
    in_region: np.ndarray,
    causes: dict[int, ResidualCauses],
    in_flight: Sequence[Interval],
) -> None:
    """Synchronize and copy calls made outside every region and every operator (e.g. ``torch.cuda.synchronize()``)."""
    for position, index in enumerate(view.launches):
        call = events.launches[index]
        cause = operator_cause(call.name)
        if cause not in ("synchronization", "memory_copy"):
            continue
        region, op, run = (int(column[position]) for column in (view.launch_regions, view.launch_ops, view.launch_runs))
        if not in_region[region] and op < 0 and run >= 0:
            overlap = covered_within(in_flight, call.start_us, call.start_us + call.duration_us) if in_flight else 0.0
            causes[span_run_index(runs[run].name)].known_us[cause] += call.duration_us - overlap
