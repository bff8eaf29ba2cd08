"""The pure function that builds the profile document from a trace.

The trace is the evidence and the document is derived from it: a live capture (events read from
the profiler) and an offline re-analysis of the saved Chrome trace both go through
`profile_from_events`, with the same events, so they agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aitune.analysis import attribution, warnings
from aitune.analysis.attribution import AttributedRun, RegionNode
from aitune.analysis.communication import Communication, communication
from aitune.analysis.events import TraceEvents, read_trace_events
from aitune.analysis.gc_pause import gc_paused
from aitune.analysis.memory import MEASURED_RUNS, MEMORY_KEY, OPERATOR_RUNS, memory_section
from aitune.analysis.operators import key_averages
from aitune.analysis.phases import run_phases
from aitune.analysis.region_operators import NodeKey, OperatorMix, region_operator_mixes
from aitune.analysis.region_work import RegionWork, region_work
from aitune.analysis.residual import ResidualCauses, residual_causes
from aitune.analysis.shares import fraction
from aitune.analysis.stamps import timed_events
from aitune.analysis.statistics import (
    capture_overhead,
    overhead_warnings,
    run_statistics,
    statistics_warnings,
    warmup_summary,
)
from aitune.analysis.warnings import ProfileWarning
from aitune.errors import ProfileError
from aitune.markers import OPERATOR_RUN_WALLS_KEY, PLAIN_WALLS_KEY, parse_region_id
from aitune.report.document import ProfileDoc, is_lite
from aitune.report.model import SCHEMA_VERSION


@gc_paused()
def build_profile(trace: Mapping[str, Any] | TraceEvents, source: str = "the trace") -> ProfileDoc:
    """Derive the profile document from a Chrome trace: an aitune capture's, NVIDIA AITune 0.6's, or
    any torch.profiler trace recorded with a schedule (``prof.step()`` after each iteration).

    ``trace`` is the parsed document, or its events already read (`aitune.report.io.read_trace_file_events`).
    `ProfileError`, naming ``source``, when the trace holds no run marker of any of these kinds.
    """
    if isinstance(trace, TraceEvents):
        events = trace
    else:
        try:
            events = read_trace_events(trace)
        except ProfileError as error:
            raise ProfileError(f"{source}: {error}") from None
    if not events.runs:
        raise ProfileError(
            f"{source}: no ProfilerStep#N or aitune run spans in this trace; record it with "
            "torch.profiler.profile(schedule=...) and call prof.step() after each iteration, "
            "or capture it with `aitune-profile capture`."
        )
    try:
        return profile_from_events(events)
    except ProfileError as error:  # a trace read but not analysable (its regions nest too deep)
        raise ProfileError(f"{source}: {error}") from None


@gc_paused()
def profile_from_events(events: TraceEvents) -> ProfileDoc:
    """Derive the profile document from a capture's events and its aitune metadata.

    The metadata supplies what the events cannot (config, target, input, instrumented regions,
    wall times, environment); everything measured comes from the events. A capture that traced
    operators in runs of their own carries its clock-timed runs in the metadata (`timed_events`):
    those are the document's ``runs``, and the profiler's are its ``operator_runs``.
    """
    timed = timed_events(events.metadata)
    if timed is None:
        return _document(events, None if is_lite(events.metadata) else events)
    return _document(timed, events)


def _document(timing: TraceEvents, operators: TraceEvents | None) -> ProfileDoc:
    """The document of the runs in ``timing``; the operator sections come from ``operators`` (the
    same events when they are the profiler's, None for a lite capture)."""
    meta = timing.metadata
    result = attribution.attribute_runs(timing, meta.get("run_wall_times_us", ()))
    spanning = attribution.spanning_regions(result.runs)
    traced = operators is timing
    separate = None  # the operator runs' attribution, when they are runs of their own
    if operators is not None and not traced:
        separate = attribution.attribute_runs(operators, operators.metadata.get(OPERATOR_RUN_WALLS_KEY, ()))
        spanning = _common_prefix(spanning, attribution.spanning_regions(separate.runs))  # one level for both
    runs = _below(result, spanning)
    known = {region["id"]: region for region in meta.get("regions", ())}
    doc = dict(
        schema_version=SCHEMA_VERSION,
        created_at=meta.get("created_at", ""),
        aitune_version=meta.get("aitune_version", ""),
        config=dict(meta.get("config", {})),
        target=dict(meta.get("target", {})),
        input=dict(meta.get("input", {})),
        runs=_traced_run_docs(timing, runs, spanning) if traced else [run_doc(run) for run in runs],
        profiler=_profiler_section(operators or timing, meta, with_operators=operators is not None),
        regions=[region_meta(region, known) for region in result.observed_region_ids],
        warnings=_warnings(result, meta, known, len(runs), timing.trace_kind),
    )
    if separate is not None and separate.runs:
        doc["operator_runs"] = _traced_run_docs(operators, _below(separate, spanning), spanning)
    if operators is not None:
        doc["memory"] = _memory(operators, traced)
    if spanning:
        doc["spanning_regions"] = spanning
    _add_phases(doc, timing, spanning)
    if runs:
        doc["statistics"] = run_statistics(runs)
        doc["warnings"] += statistics_warnings(runs)
    if meta.get("warmup_wall_times_us"):
        requested = meta.get("config", {}).get("warmup_runs", 0)
        doc["warmup"] = warmup_summary(meta["warmup_wall_times_us"], requested, meta.get("run_wall_times_us", ()))
        if meta.get(PLAIN_WALLS_KEY):  # a plain baseline after the runs: the warmups beyond the requested were runs
            doc["warmup"]["set_aside"] = max(0, doc["warmup"]["performed"] - requested)
    overhead = capture_overhead(
        meta.get("warmup_wall_times_us", ()), meta.get("run_wall_times_us", ()), meta.get(PLAIN_WALLS_KEY, ())
    )
    if overhead is not None:
        doc["capture_overhead"] = overhead
        doc["warnings"] += overhead_warnings(overhead)
    if "environment" in meta:
        doc["environment"] = dict(meta["environment"])
    if "distributed" in meta:
        doc["distributed"] = dict(meta["distributed"])
    waits = meta.get("barrier_wait_us", ())
    for run in doc["runs"]:
        if run["run_index"] < len(waits):
            run["barrier_wait_us"] = waits[run["run_index"]]
    return doc


def _add_phases(doc: ProfileDoc, timing: TraceEvents, spanning: list[str]) -> None:
    """``phase_split``, and each run's ``phases`` and ``generation``, when the runs are generate-like."""
    split, by_run = run_phases(timing, spanning, timing.metadata.get("regions", ()))
    if split is None:
        return
    doc["phase_split"] = split.to_dict()
    for run in doc["runs"]:
        run.update(by_run.get(run["run_index"], {}))


def _memory(operators: TraceEvents, traced: bool) -> dict[str, Any]:
    """The ``memory`` section: a memory run's, carried in the metadata, else that of the runs that traced
    operators (the operator runs of a clock-timed capture, or the measured runs of a trace recorded
    with memory by another tool; ``event_count`` 0 when none was)."""
    carried = operators.metadata.get(MEMORY_KEY)
    if isinstance(carried, Mapping):
        return dict(carried)
    return memory_section(operators, MEASURED_RUNS if traced else OPERATOR_RUNS)


def _common_prefix(first: list[str], second: list[str]) -> list[str]:
    """The spanning regions both kinds of run share, outermost first."""
    common = []
    for one, other in zip(first, second, strict=False):
        if one != other:
            break
        common.append(one)
    return common


def _below(result: attribution.Attribution, spanning: list[str]) -> list[AttributedRun]:
    """The attributed runs in order, each at the level below its ``spanning`` regions."""
    return sorted((attribution.descend(run, spanning) for run in result.runs), key=lambda run: run.run_index)


def _traced_run_docs(events: TraceEvents, runs: list[AttributedRun], spanning: list[str]) -> list[dict[str, Any]]:
    """The JSON of ``runs`` whose operators ``events`` traced: with residual causes, operator mixes
    and, where the trace holds any, communication."""
    comm = communication(events)
    causes = _residual_causes(events, spanning, runs, comm)
    mixes = region_operator_mixes(events)
    works = region_work(events) if events.op_inputs else None  # no shapes recorded: no work to tell
    return [run_doc(run, causes.get(run.run_index), mixes, comm, works) for run in runs]


def run_doc(
    run: AttributedRun,
    causes: ResidualCauses | None = None,
    mixes: Mapping[NodeKey, OperatorMix] | None = None,
    comm: Communication | None = None,
    works: Mapping[NodeKey, RegionWork] | None = None,
) -> dict[str, Any]:
    """The JSON shape of one attributed run; device keys only when the run has device data.

    ``mixes`` (from `region_operator_mixes`) adds each region's ``operators``: on the tree's nodes
    when the run has a tree, else on its regions; a region without operators gets a count of 0.
    ``works`` (from `region_work`) adds each region's ``work`` the same way.
    ``comm`` (from `communication`) adds ``communication`` to the run, its regions, tree nodes and residual.
    """
    timing = dict(cpu_time_us=run.cpu_time_us)
    if run.wall_time_us is not None:
        timing["wall_time_us"] = run.wall_time_us
    if run.device_time_us is not None:
        timing["device_time_us"] = run.device_time_us
    has_tree = any(node.children for node in run.roots().values())
    doc = dict(
        run_index=run.run_index,
        timing=timing,
        regions=[
            _region_share(node, run, None if has_tree else mixes, None if has_tree else works)
            for node in run.regions.values()
        ],
        residual=dict(**run.residual()),
    )
    if causes is not None:
        doc["residual"]["causes"] = causes.to_dict(run)
    if has_tree:
        doc["tree"] = [tree_node(node, run, mixes, comm=comm, works=works) for node in run.roots().values()]
    if comm is not None:
        level = _level_keys(run)
        for share, key in zip(doc["regions"], level, strict=True):
            share["communication"] = comm.share(key)
        doc["residual"]["communication"] = comm.to_dict(comm.residual(run.run_index, level))
        doc["communication"] = comm.run(run.run_index)
    return doc


def _level_keys(run: AttributedRun) -> list[NodeKey]:
    """The tree-node key of each of the run's ``regions``: below its spanning regions, if any."""
    above = tuple(node.region_id for node in run.spanning)
    return [(run.run_index, (*above, region)) for region in run.regions]


def _residual_causes(
    events: TraceEvents, spanning: list[str], runs: list[AttributedRun], comm: Communication | None
) -> dict[int, ResidualCauses]:
    """The residual causes of every run; with communication, its own cause (see `residual_causes`)."""
    if comm is None:
        return residual_causes(events, spanning)
    outside = {run.run_index: comm.residual(run.run_index, _level_keys(run)).cpu_time_us for run in runs}
    return residual_causes(events, spanning, comm.in_flight, outside)


def tree_node(
    node: RegionNode,
    run: AttributedRun,
    mixes: Mapping[NodeKey, OperatorMix] | None = None,
    above: tuple[str, ...] = (),
    comm: Communication | None = None,
    works: Mapping[NodeKey, RegionWork] | None = None,
) -> dict[str, Any]:
    """One node of a run's region tree, its children included; ``above``: the region ids of its ancestors."""
    path = (*above, node.region_id)
    children = [tree_node(child, run, mixes, path, comm, works) for child in node.children.values()]
    tree = dict(
        region_id=node.region_id,
        calls=node.calls,
        cpu_time_us=node.cpu_time_us,
        cpu_self_time_us=max(0.0, node.cpu_time_us - sum(child["cpu_time_us"] for child in children)),
        cpu_time_fraction=fraction(node.cpu_time_us, run.cpu_time_us),
    )
    if run.device_time_us is not None:
        tree["device_time_us"] = node.device_time_us
        tree["device_self_time_us"] = max(0.0, node.device_time_us - sum(c["device_time_us"] for c in children))
        tree["device_time_fraction"] = fraction(node.device_time_us, run.device_time_us)
        tree["device_busy_time_us"] = node.device_busy_us
    if mixes is not None:
        tree["operators"] = mixes.get((run.run_index, path), OperatorMix()).to_dict()
    if works is not None:
        tree["work"] = works.get((run.run_index, path), RegionWork()).to_dict()
    if comm is not None:
        tree["communication"] = comm.share((run.run_index, path))
    tree["children"] = children
    return tree


def region_meta(region: str, known: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Metadata of one observed region: as recorded at capture, or derived from its id when unknown."""
    if region in known:
        return dict(**known[region])
    kind, name = parse_region_id(region)
    meta = dict(id=region, name=name, kind=kind.document_kind)
    if kind.managed:
        meta["wrapper_state"] = "unknown"
    return meta


def _region_share(
    node: RegionNode,
    run: AttributedRun,
    mixes: Mapping[NodeKey, OperatorMix] | None,
    works: Mapping[NodeKey, RegionWork] | None = None,
) -> dict[str, Any]:
    share = dict(
        region_id=node.region_id,
        calls=node.calls,
        cpu_time_us=node.cpu_time_us,
        cpu_time_fraction=fraction(node.cpu_time_us, run.cpu_time_us),
    )
    if run.device_time_us is not None:
        share["device_time_us"] = node.device_time_us
        share["device_time_fraction"] = fraction(node.device_time_us, run.device_time_us)
        share["device_busy_time_us"] = node.device_busy_us
    if mixes is not None:
        share["operators"] = mixes.get((run.run_index, (node.region_id,)), OperatorMix()).to_dict()
    if works is not None:
        share["work"] = works.get((run.run_index, (node.region_id,)), RegionWork()).to_dict()
    return share


def _profiler_section(events: TraceEvents, meta: Mapping[str, Any], with_operators: bool) -> dict[str, Any]:
    profiler = dict(meta.get("profiler", {}))
    profiler.setdefault("activities", ["CPU", "CUDA"] if events.has_device_data else ["CPU"])  # as the trace shows
    profiler["trace_kind"] = events.trace_kind
    if with_operators:
        profiler["key_averages"] = key_averages(events)
    return profiler


def _warnings(
    result: attribution.Attribution, meta: Mapping[str, Any], known: Mapping[str, Any], run_count: int, trace_kind: str
) -> list[ProfileWarning]:
    found: list[ProfileWarning] = list(meta.get("warnings", ()))
    found += warnings.unmapped_region_spans(result.unmapped_region_spans)
    expected = meta.get("config", {}).get("measured_runs")
    if expected is not None:
        found += warnings.run_count_mismatch(expected, run_count)
    found += warnings.unregistered_regions(result.observed_region_ids, known)
    found += warnings.compiled_regions(result.observed_region_ids)
    if not result.observed_region_ids:
        found += warnings.no_regions_observed(len(known), run_count, trace_kind)
    return found
