"""The profile document: its shapes (TypedDicts), the readers every later stage calls, and its scenarios.

`aitune.report.builder` derives a document from a trace; this module needs no trace analysis (nor
numpy), so the commands that only read a document never import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Required, TypedDict, overload

import msgspec

from aitune.analysis.warnings import ProfileWarning
from aitune.report.memo import derived
from aitune.report.model import UNSET, Profile, Record, Run, UnsetType, as_profile, given

SCHEMA_VERSION = 1

FULL_MODE = "full"
LITE_MODE = "lite"
"""``profiler.mode``: a full capture traces operators; a lite one times runs and regions only, so its
document has no operator table (``profiler.key_averages``), residual causes or operator mixes."""

LITE_LACKS = (
    "runs and regions timed by a clock, without the profiler: no operator table, residual causes, operator mixes "
    "or memory"
)
"""What a lite document lacks, in the words every reader shows."""


class _Mode(Record):
    mode: str | UnsetType = UNSET


class _Profiled(Record):
    """What `is_lite` reads of a dict: a document's, or a capture's metadata, which is no document."""

    profiler: _Mode | UnsetType = UNSET


def is_lite(doc: Profile | Mapping[str, Any]) -> bool:
    """Whether ``doc`` (a document, or a capture's metadata) comes from a lite capture."""
    profiler = doc.profiler if isinstance(doc, Profile) else msgspec.convert(doc, _Profiled).profiler
    return profiler is not UNSET and profiler.mode == LITE_MODE


def operator_runs_note(doc: Profile | Mapping[str, Any]) -> str | None:
    """How a full capture that traced operators in runs of their own got its numbers, in the words
    every reader shows; None for any other document."""
    count = len(given(as_profile(doc).operator_runs, []))
    if not count:
        return None
    return f"operators traced in {count} run(s) of their own, after the measured runs (timed by a clock)"


def calls_note(doc: Profile | Mapping[str, Any]) -> str | None:
    """Every call the capture made and what it was for, in the words every reader shows; None for a
    document without a warmup section (an analysed foreign trace, or no warmups asked for)."""
    record = as_profile(doc)
    warmup = record.warmup
    if warmup is UNSET:
        return None
    set_aside = given(warmup.set_aside, 0)
    parts = [f"{warmup.performed - set_aside} plain warmup(s)"]
    if set_aside:
        parts.append(f"{set_aside} run(s) set aside as warmups (the run time was still falling)")
    parts.append(f"{len(record.runs)} measured run(s)")
    if set_aside:
        plain = 0 if record.capture_overhead is UNSET else record.capture_overhead.plain_samples
        parts.append(f"{plain} plain call(s) for the overhead's baseline")
    if count := len(given(record.operator_runs, [])):
        parts.append(f"{count} operator run(s) (the operator table; the first records the input shapes)")
    elif is_lite(record):
        parts.append("1 instrumented warmup (it records the input shapes)")
    elif record.profiler.mode == FULL_MODE:
        parts.append("1 memory run and the profiler's warmup")
    return " + ".join(parts)


@overload
def operator_runs(doc: Profile) -> list[Run]: ...
@overload
def operator_runs(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]: ...


class Timing(TypedDict, total=False):
    wall_time_us: float
    cpu_time_us: Required[float]
    device_time_us: float


class CommunicationTimes(TypedDict, total=False):
    """Collective and point-to-point operations inside a region, a residual or a run (`aitune.analysis.communication`).

    Present on every region, tree node, residual and run of a document whose trace holds communication, else absent.
    """

    cpu_time_us: Required[float]  # wall time with an operation in flight on any thread (a total, like cpu_time_us)
    device_time_us: float  # NCCL kernel time launched inside; only with device data
    bytes: int  # moved by the operations that started inside; only when the trace gives sizes
    device_overlap_us: float  # runs only: NCCL kernel time during which a compute kernel ran too
    device_overlap_fraction: float  # runs only: device_overlap_us ÷ device_time_us


class OperatorsInside(TypedDict):
    """The operators that ran directly inside a region in one run (see `aitune.analysis.region_operators`)."""

    count: int
    categories: dict[str, float]  # CPU µs by category; part of the region's CPU self time


class RegionShare(TypedDict, total=False):
    region_id: Required[str]
    calls: Required[int]
    cpu_time_us: Required[float]
    cpu_time_fraction: Required[float]
    device_time_us: float  # absent, not None, when the run has no device data
    device_time_fraction: float
    device_busy_time_us: float  # union of its kernels' intervals; far below device_time_us if they overlap
    operators: OperatorsInside  # in runs without a tree; with one, on the tree's nodes
    work: dict[str, Any]  # beside ``operators``, when the trace recorded shapes: see aitune.analysis.region_work
    communication: CommunicationTimes


class Residual(TypedDict, total=False):
    cpu_time_us: Required[float]
    cpu_time_fraction: Required[float]
    device_time_us: float
    device_time_fraction: float
    causes: dict[str, dict[str, float]]  # synchronization, memory_copy, tensor_ops, python: CPU µs and fraction
    communication: CommunicationTimes


class TreeNode(TypedDict, total=False):
    """A region entered during a run, with the regions entered while it was open (``children``).

    Per domain: ``*_time_us`` is the total, ``*_self_time_us`` what no child accounts for, so
    children's totals + self = total. ``device_busy_time_us`` is the union of its kernels' intervals.
    """

    region_id: Required[str]
    calls: Required[int]
    cpu_time_us: Required[float]
    cpu_self_time_us: Required[float]
    cpu_time_fraction: Required[float]
    device_time_us: float
    device_self_time_us: float
    device_time_fraction: float
    device_busy_time_us: float
    operators: OperatorsInside
    work: dict[str, Any]
    communication: CommunicationTimes
    children: Required[list[TreeNode]]


class RunDoc(TypedDict, total=False):
    run_index: Required[int]
    timing: Required[Timing]
    regions: Required[list[RegionShare]]  # the level below the spanning regions, when some span the run
    residual: Required[Residual]  # time outside `regions`: the spanning regions' self time included
    tree: list[TreeNode]  # only when some region was entered inside another; spanning regions at the top
    barrier_wait_us: float  # distributed captures: this rank's wait in the alignment barrier before the run
    communication: CommunicationTimes  # the run's totals, only when the trace holds communication
    phases: list[dict[str, Any]]  # generate-like runs: encoder, prefill, decode (see aitune.analysis.phases)
    generation: dict[str, Any]  # generate-like runs: tokens made, time to first token, per output token


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
    statistics: dict[str, Any]  # summaries over the runs: see aitune.analysis.statistics.run_statistics
    capture_overhead: dict[str, Any]
    warmup: dict[str, Any]  # requested, performed, steady: see aitune.analysis.statistics.warmup_summary
    scenarios: list[dict[str, Any]]  # one section per named input: see combine_scenarios
    operator_runs: list[RunDoc]  # runs of their own that traced operators, when `runs` were clock-timed
    memory: dict[str, Any]  # bytes allocated, freed and peak live per run, region and device: see analysis.memory
    spanning_regions: list[str]  # regions every run is spent inside of, outermost first: see spanning_regions
    distributed: dict[str, Any]  # one rank of a torch.distributed job: rank, world_size, local_rank, backend, ...
    phase_split: dict[str, Any]  # generate-like runs: how they split into phases, and on what evidence


SCENARIO_KEYS = (
    "input",
    "memory",
    "runs",
    "operator_runs",
    "profiler",
    "regions",
    "warnings",
    "statistics",
    "capture_overhead",
    "warmup",
    "trace_file",
    "spanning_regions",
    "phase_split",
)
"""The keys of a document that differ from one scenario to another."""


def combine_scenarios(names: list[str], docs: list[ProfileDoc]) -> ProfileDoc:
    """One document for several scenarios: ``scenarios`` holds each one's section; the first is also top-level.

    Readers that know one input only (AITune's) see the first scenario, as if it had been profiled alone.
    """
    assert names and len(names) == len(docs), "one name per scenario document"
    sections = [
        {"name": name, **{key: doc[key] for key in SCENARIO_KEYS if key in doc}}  # type: ignore[literal-required]
        for name, doc in zip(names, docs, strict=True)
    ]
    return {**docs[0], "scenarios": sections}  # type: ignore[return-value]


def scenario_names(doc: Profile | Mapping[str, Any]) -> list[str]:
    """The scenario names of a document; [] when it profiled one input."""
    return [scenario.name for scenario in given(as_profile(doc).scenarios, [])]


def select_scenario(doc: ProfileDoc, name: str | None) -> ProfileDoc:
    """The document as if only scenario ``name`` had been profiled (None: the document as it is).

    Raises `KeyError` naming the scenarios there are when ``name`` is not one of them.
    """
    if name is None:
        return doc
    # one view per scenario within `computed_once`, so the views derived from it are found once too
    return derived(doc, ("scenario", name), lambda: _scenario_view(doc, name))


def _scenario_view(doc: ProfileDoc, name: str) -> ProfileDoc:
    for scenario in doc.get("scenarios", []):
        if scenario["name"] == name:
            view = {key: value for key, value in doc.items() if key not in SCENARIO_KEYS and key != "scenarios"}
            view.update({key: value for key, value in scenario.items() if key != "name"})
            return view  # type: ignore[return-value]
    raise KeyError(f"no scenario {name!r} in this profile; it has {scenario_names(doc) or 'none'}")
