"""The profile document: its shapes (TypedDicts) and the pure function that builds it from a trace.

The trace is the evidence and the document is derived from it: a live capture (events read from
the profiler) and an offline re-analysis of the saved Chrome trace both go through
`profile_from_events`, with the same events, so they agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Required, TypedDict

from aitune.analysis import attribution, warnings
from aitune.analysis.attribution import AttributedRun, RegionNode
from aitune.analysis.events import TraceEvents, read_trace_events
from aitune.analysis.operators import key_averages
from aitune.analysis.warnings import ProfileWarning

SCHEMA_VERSION = 1

AOT_KIND = "aot_managed_module"
JIT_KIND = "jit_managed_module"
UNTUNED_KIND = "untuned_module"


class Timing(TypedDict, total=False):
    wall_time_us: float
    cpu_time_us: Required[float]
    device_time_us: float


class RegionShare(TypedDict, total=False):
    region_id: Required[str]
    calls: Required[int]
    cpu_time_us: Required[float]
    cpu_time_fraction: Required[float]
    device_time_us: float  # absent, not None, when the run has no device data
    device_time_fraction: float


class Residual(TypedDict, total=False):
    cpu_time_us: Required[float]
    cpu_time_fraction: Required[float]
    device_time_us: float
    device_time_fraction: float


class RunDoc(TypedDict):
    run_index: int
    timing: Timing
    regions: list[RegionShare]
    residual: Residual


class RegionMeta(TypedDict, total=False):
    id: Required[str]
    name: Required[str]
    kind: Required[str]
    module_type: str
    wrapper_state: str  # managed regions only


class ProfileDoc(TypedDict, total=False):
    schema_version: Required[int]
    created_at: Required[str]
    aitune_version: Required[str]
    config: Required[dict[str, Any]]
    target: Required[dict[str, Any]]
    input: Required[dict[str, Any]]
    runs: Required[list[RunDoc]]
    profiler: Required[dict[str, Any]]
    regions: Required[list[RegionMeta]]
    warnings: Required[list[ProfileWarning]]
    environment: dict[str, Any]
    trace_file: str


def build_profile(trace: Mapping[str, Any]) -> ProfileDoc:
    """Derive the profile document from a Chrome trace written by an aitune capture."""
    return profile_from_events(read_trace_events(trace))


def profile_from_events(events: TraceEvents) -> ProfileDoc:
    """Derive the profile document from a capture's events and its aitune metadata.

    The metadata supplies what the events cannot (config, target, input, instrumented regions,
    wall times, environment); everything measured comes from the events.
    """
    meta = events.metadata
    result = attribution.attribute_runs(events, meta.get("run_wall_times_us", ()))
    runs = sorted(result.runs, key=lambda run: run.run_index)
    known = {region["id"]: region for region in meta.get("regions", ())}
    doc = ProfileDoc(
        schema_version=SCHEMA_VERSION,
        created_at=meta.get("created_at", ""),
        aitune_version=meta.get("aitune_version", ""),
        config=dict(meta.get("config", {})),
        target=dict(meta.get("target", {})),
        input=dict(meta.get("input", {})),
        runs=[run_doc(run) for run in runs],
        profiler=_profiler_section(events, meta),
        regions=[region_meta(region, known) for region in result.observed_region_ids],
        warnings=_warnings(result, meta, known, len(runs)),
    )
    if "environment" in meta:
        doc["environment"] = dict(meta["environment"])
    return doc


def run_doc(run: AttributedRun) -> RunDoc:
    """The JSON shape of one attributed run; device keys only when the run has device data."""
    timing = Timing(cpu_time_us=run.cpu_time_us)
    if run.wall_time_us is not None:
        timing["wall_time_us"] = run.wall_time_us
    if run.device_time_us is not None:
        timing["device_time_us"] = run.device_time_us
    return RunDoc(
        run_index=run.run_index,
        timing=timing,
        regions=[_region_share(node, run) for node in run.regions.values()],
        residual=Residual(**run.residual()),  # type: ignore[typeddict-item]
    )


def region_meta(region: str, known: Mapping[str, Mapping[str, Any]]) -> RegionMeta:
    """Metadata of one observed region: as recorded at capture, or derived from its id when unknown."""
    if region in known:
        return RegionMeta(**known[region])  # type: ignore[typeddict-item]
    prefix, _, name = region.partition(":")
    kind = {"aot_module": AOT_KIND, "jit_module": JIT_KIND}.get(prefix, UNTUNED_KIND)
    meta = RegionMeta(id=region, name=name, kind=kind)
    if kind != UNTUNED_KIND:
        meta["wrapper_state"] = "unknown"
    return meta


def _region_share(node: RegionNode, run: AttributedRun) -> RegionShare:
    share = RegionShare(
        region_id=node.region_id,
        calls=node.calls,
        cpu_time_us=node.cpu_time_us,
        cpu_time_fraction=attribution.fraction(node.cpu_time_us, run.cpu_time_us),
    )
    if run.device_time_us is not None:
        share["device_time_us"] = node.device_time_us
        share["device_time_fraction"] = attribution.fraction(node.device_time_us, run.device_time_us)
    return share


def _profiler_section(events: TraceEvents, meta: Mapping[str, Any]) -> dict[str, Any]:
    profiler = dict(meta.get("profiler", {}))
    profiler["key_averages"] = key_averages(events)
    return profiler


def _warnings(
    result: attribution.Attribution, meta: Mapping[str, Any], known: Mapping[str, Any], run_count: int
) -> list[ProfileWarning]:
    found: list[ProfileWarning] = list(meta.get("warnings", ()))
    found += warnings.unmapped_region_spans(result.unmapped_region_spans)
    expected = meta.get("config", {}).get("measured_runs")
    if expected is not None:
        found += warnings.run_count_mismatch(expected, run_count)
    found += warnings.unregistered_regions(result.observed_region_ids, known)
    if not result.observed_region_ids:
        found += warnings.no_regions_observed(len(known), run_count)
    return found
