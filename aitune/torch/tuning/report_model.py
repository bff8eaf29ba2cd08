"""The tuning report's one written definition (``tuning.json``), as `msgspec` Structs (no torch in this file).

`aitune.torch.tuning.report.tuning_report` writes the report from the tuner's records
(`aitune.torch.tuning.outcome`) and the loop adds its verification, precision, task gate and memory
(`aitune.torch.loop.outputs`); converting a report into `TuningReport` checks types, ranges, enums and required
fields and names the JSON path of the first problem. ``tuning.schema.json`` beside this module is generated from
these Structs for outside consumers (`aitune.torch.tuning.report_schema`); a test keeps the shipped file in step.

A part of the same shape in another document is that document's Struct: a graph's spec is the plan's `Graph`,
the tolerance the plan's, the process memory the plan's; the verification, the task gate and the ranks are the
compare report's; the environment is the profile's. Every key `tuning_report` always writes is required, and so
are the keys of each record it writes whole; the keys its writer names as added since the first reports
(``speedup_interval``, ``verdict``, ``thread_budget``, ``held_memory``, ``precision``, ``precision_choices``) and
the loop's extras are optional, `UNSET` when absent. Backends and strategies are a user's to write, so their names
are any bounded text and their settings any JSON object. Every Struct tolerates unknown keys, but a measured hold
refuses them. Every number is at most ``MAX_FIGURE`` (`aitune.report.model`) in magnitude, so NaN and ±Infinity
are refused by every bound; every string and list is bounded in length.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import UNSET, Meta, Struct, UnsetType

from aitune.compare.report_model import Ranks, TaskGate, Verification
from aitune.report.model import (
    Count,
    Environment,
    Figure,
    Fraction,
    Label,
    Microseconds,
    Rate,
    Sentence,
    rows,
)
from aitune.torch.tuning.decision import FASTER, NOT_FASTER, UNDECIDED
from aitune.torch.tuning.plan_model import Graph, GraphId, HeldMemory, PlanTolerance, Precision, ProcessMemory

REPORT_SCHEMA_VERSION = 1
"""The version of tuning.json this aitune writes: it changes when a key's meaning does."""

Speedup = Rate
"""Eager ÷ candidate (above 1: faster), or an end of its interval."""
Seconds = Rate
"""A time in seconds."""
Settings = Annotated[dict[Label, Any], Meta(max_length=1024)]
"""A backend's constructor arguments or what its build chose: any JSON object of at most 1024 keys."""


class Part(Struct, kw_only=True):
    """A part of the report: keyword fields, unknown keys ignored."""


class ThreadBudget(Part):
    """Torch's threads, which eager, every candidate and both captures ran with."""

    intra_op_threads: Count
    inter_op_threads: Count


class SpeedupInterval(Part):
    """The median per-round speedup (eager ÷ candidate), its interval, and how many paired rounds made it."""

    speedup: Speedup
    low: Speedup
    high: Speedup
    rounds: Count
    confidence: Fraction


class CandidateMemory(HeldMemory):
    """What a candidate's build holds beside the original module, and how it was measured."""

    measured_by: Literal["process_rss"] | UnsetType = UNSET


class CandidateResult(Part):
    """One candidate's line (`aitune.torch.tuning.outcome.CandidateResult`): its backend and settings, status and
    why, build time (s), latency (µs), speedup over eager, verdict and its error against the original (null where
    a figure does not apply)."""

    backend: Label
    config: Settings
    status: Literal["accepted", "winner", "rejected", "skipped"]
    reason: Sentence | None
    build_time_s: Seconds | None
    build_details: Settings | None
    latency_median_us: Microseconds | None
    latency_cv: Rate | None
    eager_latency_median_us: Microseconds | None
    speedup_vs_eager: Speedup | None
    max_abs_error: Rate | None
    cosine_similarity: Figure | None
    precision: Precision | UnsetType = UNSET
    held_memory: CandidateMemory | UnsetType | None = UNSET
    speedup_interval: SpeedupInterval | UnsetType | None = UNSET
    verdict: Literal[FASTER, NOT_FASTER, UNDECIDED] | UnsetType | None = UNSET


class EagerLatency(Part):
    """The original module timed beside the first timed candidate (null when none was timed)."""

    latency_median_us: Microseconds | None
    latency_cv: Rate | None


class BackendChoice(Part):
    name: Label
    config: Settings


class Budget(Part):
    """The time budget: its total and what was kept back (s), each region's share and each backend's tries."""

    time_budget_s: Seconds
    reserved_s: Seconds | None
    region_shares_s: Annotated[dict[Label, Seconds | None], Meta(max_length=1024)]
    measured_try_s: Annotated[dict[Label, rows(Seconds | None)], Meta(max_length=1024)]


class Strategy(Part):
    """The strategy's settings (`TuneStrategy.describe`): its name, backends in order, tolerance and budget; a
    margin and a total budget for ``min_latency``."""

    name: Label
    backends: rows(BackendChoice)
    tolerance: PlanTolerance
    budget: Budget | None
    precision: Precision | UnsetType = UNSET
    margin: Rate | UnsetType = UNSET
    time_budget_s: Seconds | UnsetType | None = UNSET


class GraphResult(Part):
    """One graph (`aitune.torch.tuning.outcome.GraphResult`): its spec, the strategy, the eager baseline, every
    candidate in the order tried, and the winner's backend name (``eager`` when none won)."""

    graph_id: GraphId
    spec: Graph
    samples: Count
    strategy: Strategy
    eager: EagerLatency
    candidates: rows(CandidateResult)
    winner: Label


class RegionOutcome(Part):
    """One module (`aitune.torch.tuning.outcome.RegionOutcome`): its graphs, the precision its winner computes at,
    and for JIT the error that stopped it, where its traceback went, and its state."""

    name: Label
    region_id: Label
    module_type: Label
    device: Label
    graphs: rows(GraphResult)
    precision: Precision | UnsetType | None = UNSET
    error: Sentence | UnsetType = UNSET
    error_log: Label | UnsetType | None = UNSET
    state: Label | UnsetType = UNSET


class PrecisionChoice(Part):
    """One region at a reduced precision: the level it runs at after the loop, and why, in one clause."""

    path: Label
    precision: Precision
    why: Sentence


class RegionWeights(Part):
    path: Label
    original_bytes: Count
    tuned_bytes: Count


class WeightMemory(Part):
    """What the tuned regions' weights take, per region and in all: the original module's bytes and the tuned
    copy's."""

    regions: rows(RegionWeights)
    original_bytes: Count
    tuned_bytes: Count


class TuningReport(Part):
    """The report of one tuning call: the environment and threads it ran with and, per module and graph, every
    candidate with its build time, latency, error and verdict; after them, the loop's verification, precision,
    task gate and memory. Readers ignore unknown keys."""

    schema_version: Literal[REPORT_SCHEMA_VERSION]
    created_at: Label
    aitune_version: Label
    environment: Environment
    modules: rows(RegionOutcome)
    thread_budget: ThreadBudget | UnsetType = UNSET
    verification: Verification | UnsetType = UNSET
    precision: Precision | UnsetType = UNSET
    precision_choices: rows(PrecisionChoice) | UnsetType = UNSET
    task_gate: TaskGate | UnsetType | None = UNSET
    weight_memory: WeightMemory | UnsetType = UNSET
    process_memory: ProcessMemory | UnsetType = UNSET
    ranks: Ranks | UnsetType = UNSET
    generation_cost: Rate | UnsetType = UNSET  # eager with the decoder recipe's settings ÷ without
