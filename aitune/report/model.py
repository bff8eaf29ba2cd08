"""The profile document's one written definition, as `msgspec` Structs.

Decoding a document into `Profile` checks it while it is parsed — types, ranges, enums, required
fields — and names the JSON path of the first problem (`aitune.report.validate` renders it and, for
a document that fails, lists every problem). What a type cannot say (fractions that add up, children
inside their parents, phases consistent with the split) is checked on the decoded record by
`aitune.report.validate`. ``profile.schema.json`` beside this module is generated from these Structs
for outside consumers (`aitune.report.profile_schema`); a test keeps the shipped file in step.

Every Struct tolerates unknown keys (readers do too), and an optional key is `UNSET` when absent:
a present key is never null. Times are µs, fractions are in [0, 1], and every number is at most
`MAX_FIGURE` in magnitude, so NaN and ±Infinity (which JSON has not) are refused by every bound.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from aitune.errors import ProfileError
from aitune.report.memo import derived

SCHEMA_VERSION = 1
"""The version of the profile document this aitune writes and reads."""

MAX_FIGURE = 2**62
"""Largest magnitude of any number in a document (4.6·10¹⁸, the bound on byte counts): as µs it is
146,000 years, as FLOPs an hour at an exaFLOP/s. A figure past it is no measurement, prints as a
number of dozens of digits, and sums and medians of two such figures overflow to infinity."""

Figure = Annotated[float, Meta(ge=-MAX_FIGURE, le=MAX_FIGURE)]
"""A real number: finite, within `MAX_FIGURE`."""
Microseconds = Annotated[float, Meta(ge=0, le=MAX_FIGURE)]
Fraction = Annotated[float, Meta(ge=0, le=1)]
Rate = Annotated[float, Meta(ge=0, le=MAX_FIGURE)]
"""A non-negative figure that is no time: a ratio, a rate per second."""
Count = Annotated[int, Meta(ge=0, le=MAX_FIGURE)]
Positive = Annotated[int, Meta(ge=1, le=MAX_FIGURE)]
Dimension = Annotated[int, Meta(ge=-MAX_FIGURE, le=MAX_FIGURE)]
Name = Annotated[str, Meta(min_length=1)]
Code = Annotated[str, Meta(pattern="^[A-Z][A-Z0-9_]*$")]
"""A stable UPPER_SNAKE code: a warning's, a suggestion's reason's."""
Domain = Literal["cpu", "device"]
PhaseName = Literal["encoder", "prefill", "decode"]
OperatorCategory = Literal[
    "conv", "matmul", "attention", "recurrent", "elementwise_norm", "copy", "sync", "communication", "other"
]
MemoryDevice = Annotated[
    str,
    Meta(
        pattern="^[a-z_]{1,24}[0-9]{0,3}(:[0-9]{1,4})?$",
        description="An allocator's device: cpu, cuda:0, device_type_<n>[:<id>].",
    ),
]


MAX_ROWS = 2**20
"""Most rows of one list in a tune folder's reports (regions, operators, ranks, targets): far more than a
capture holds."""
Label = Annotated[str, Meta(max_length=4096)]
"""In a tune folder's reports, a region path, a region id, an operator key, a backend's name: at most 4096
characters."""
Sentence = Annotated[str, Meta(max_length=65536)]
"""In a tune folder's reports, a reason, a warning, a problem, in words: at most 65,536 characters."""


def rows(item: Any) -> Any:
    """A list of at most `MAX_ROWS` ``item``s."""
    return Annotated[list[item], Meta(max_length=MAX_ROWS)]


class Record(Struct, kw_only=True):
    """The base of every part of a document: keyword fields, unknown keys ignored."""


class Config(Record):
    warmup_runs: Count | UnsetType = UNSET
    measured_runs: Positive | UnsetType = UNSET
    uses_inference_function: bool | UnsetType = UNSET
    max_depth: Positive | UnsetType = UNSET
    record_shapes: bool | UnsetType = UNSET
    with_stack: bool | UnsetType = UNSET
    mode: Literal["full", "lite"] | UnsetType = UNSET
    capture_mode: Annotated[Literal["script"], Meta(description="A script captured as one run.")] | UnsetType = UNSET
    script_args: Annotated[Count, Meta(description="How many arguments the script was given.")] | UnsetType = UNSET
    operator_runs: (
        Annotated[
            Count | Literal["all"],
            Meta(
                description="Where operators were traced: all, in every measured run; 0, nowhere (lite); n, in n "
                "operator_runs of their own (optional)."
            ),
        ]
        | UnsetType
    ) = UNSET


class Target(Record):
    type: str | UnsetType = UNSET
    root: (
        Annotated[
            Name,
            Meta(
                description="The name of the object region paths are relative to (entry mode: the discovered global, "
                "e.g. pipe); absent when paths start at the user's globals (script mode)."
            ),
        ]
        | UnsetType
    ) = UNSET
    script: Annotated[str, Meta(description="A captured script's file name (script mode).")] | UnsetType = UNSET


class TensorSignature(Record):
    path: str
    type: str | UnsetType = UNSET
    shape: list[Dimension] | UnsetType = UNSET
    dtype: str | UnsetType = UNSET
    device: str | UnsetType = UNSET


class Input(Record):
    args_count: Count | UnsetType = UNSET
    kwargs: list[str] | UnsetType = UNSET
    signature: list[TensorSignature] | UnsetType = UNSET


class Timing(Record):
    cpu_time_us: Microseconds
    wall_time_us: Microseconds | UnsetType = UNSET
    device_time_us: Microseconds | UnsetType = UNSET


class DomainTimes(Record):
    """Times and fractions per domain; a device time comes with its fraction (checked on the record)."""

    cpu_time_us: Microseconds
    cpu_time_fraction: Fraction
    device_time_us: Microseconds | UnsetType = UNSET
    device_time_fraction: Fraction | UnsetType = UNSET


class Communication(Record):
    """Collective and point-to-point operations (c10d, gloo, NCCL) inside a region, a residual or a run;
    present everywhere in a document whose trace holds communication, absent otherwise."""

    cpu_time_us: Annotated[
        Microseconds,
        Meta(
            description="Wall time with a communication operation in flight on any thread of the process (the union "
            "of their spans); a total, like cpu_time_us."
        ),
    ]
    device_time_us: (
        Annotated[
            Microseconds, Meta(description="Duration of the NCCL kernels launched inside (only with device data).")
        ]
        | UnsetType
    ) = UNSET
    bytes: (
        Annotated[
            Count,
            Meta(description="Bytes moved by the operations that started inside (only when the trace gives sizes)."),
        ]
        | UnsetType
    ) = UNSET
    device_overlap_us: (
        Annotated[
            Microseconds,
            Meta(description="Runs only: NCCL kernel time during which a non-communication kernel ran too."),
        ]
        | UnsetType
    ) = UNSET
    device_overlap_fraction: (
        Annotated[Fraction, Meta(description="Runs only: device_overlap_us / device_time_us.")] | UnsetType
    ) = UNSET


class OperatorsInside(Record):
    """The operators that ran directly inside the region in this run (topmost ones, not inside a child
    region): their count and CPU µs by category, part of the CPU self time."""

    count: Count
    categories: dict[OperatorCategory, Microseconds]


class Work(Record):
    """The work directly inside the region in this run (aitune.analysis.region_work): FLOPs and bytes moved
    by the operators with a formula (matrix products, convolutions, attention; torch's flop-counter formulas
    on the recorded shapes), the time they took, and the time of the operators without one (uncounted:
    never zero work). Present only when the trace recorded shapes."""

    flops: Count
    bytes: Count
    counted_operators: Count
    counted_cpu_time_us: Microseconds
    uncounted_cpu_time_us: Microseconds
    flops_by_dtype: dict[str, Count]
    uncounted_operators: Annotated[
        dict[str, Microseconds],
        Meta(
            description="CPU µs of the uncounted topmost operators by name, the longest first (at most 8, the rest "
            "as (others))."
        ),
    ]
    counted_device_time_us: (
        Annotated[
            Microseconds, Meta(description="Kernels launched inside the counted operators; only with device data.")
        ]
        | UnsetType
    ) = UNSET
    uncounted_device_time_us: (
        Annotated[Microseconds, Meta(description="The region's other kernels; only with device data.")] | UnsetType
    ) = UNSET


class RegionPart(Record):
    """What a run holds of a region, at the top level or in its tree: its calls and what ran inside."""

    region_id: Name
    calls: Count
    device_busy_time_us: Microseconds | UnsetType = UNSET
    operators: OperatorsInside | UnsetType = UNSET
    communication: Communication | UnsetType = UNSET
    work: Work | UnsetType = UNSET


class RegionShare(RegionPart, kw_only=True):
    """One of a run's topmost regions: its times and its fractions of the run, per domain."""

    cpu_time_us: Microseconds
    cpu_time_fraction: Fraction
    device_time_us: Microseconds | UnsetType = UNSET
    device_time_fraction: Fraction | UnsetType = UNSET


class Cause(Record):
    cpu_time_us: Microseconds
    cpu_time_fraction: Fraction


class Residual(DomainTimes):
    causes: (
        Annotated[dict[str, Cause], Meta(description="The CPU residual by cause; the causes add up to the residual.")]
        | UnsetType
    ) = UNSET
    communication: Communication | UnsetType = UNSET


class TreeNode(RegionPart, kw_only=True):
    """A region entered during a run; children's totals + self = total, per domain."""

    cpu_time_us: Microseconds
    cpu_self_time_us: Microseconds
    cpu_time_fraction: Fraction
    children: list[TreeNode]
    device_time_us: Microseconds | UnsetType = UNSET
    device_self_time_us: Microseconds | UnsetType = UNSET
    device_time_fraction: Fraction | UnsetType = UNSET


class PhaseRegion(Record):
    region_id: Name
    calls: Count
    cpu_time_us: Microseconds
    cpu_time_fraction: Annotated[Fraction, Meta(description="Of the phase.")]


class Phase(Record):
    """One phase of a run: a stretch of its host timeline. The phases tile the run (their cpu_time_us add up
    to timing.cpu_time_us); within a phase, Σ regions[].cpu_time_fraction + residual.cpu_time_fraction = 1."""

    name: PhaseName
    cpu_time_us: Microseconds
    cpu_time_fraction: Annotated[Fraction, Meta(description="Of the run.")]
    steps: Annotated[Count, Meta(description="Calls of the step region in the phase: tokens made.")]
    regions: list[PhaseRegion]
    residual: Cause


class TimePerToken(Record):
    """Over the decode tokens: each one step's start to the next one's."""

    median: Microseconds
    p90: Microseconds
    growth: (
        Annotated[
            Rate,
            Meta(
                description="The later half of the decode tokens' median time ÷ the earlier half's: 1 steady, above 1 "
                "a cost per token that grows with the sequence (a growing cache). Present with two decode tokens "
                "or more."
            ),
        ]
        | UnsetType
    ) = UNSET


class Generation(Record):
    """A generate-like run's token figures (host timeline)."""

    output_tokens: Annotated[Count, Meta(description="Calls of the step region: one token each.")]
    ttft_us: Annotated[
        Microseconds,
        Meta(description="Time to first token: the run's start to the second step's start (the end of prefill)."),
    ]
    tokens_per_second: Annotated[Rate, Meta(description="output_tokens over the run's time.")]
    decode_tokens_per_second: (
        Annotated[Rate, Meta(description="Decode tokens over the decode phase's time.")] | UnsetType
    ) = UNSET
    time_per_output_token_us: TimePerToken | UnsetType = UNSET


class Run(Record):
    run_index: Count
    timing: Timing
    regions: list[RegionShare]
    residual: Residual
    rank: (
        Annotated[
            Count,
            Meta(description="In a merged document: the rank this run was copied from, the slowest in that step."),
        ]
        | UnsetType
    ) = UNSET
    tree: list[TreeNode] | UnsetType = UNSET
    barrier_wait_us: (
        Annotated[
            Microseconds,
            Meta(
                description="Distributed captures: the time this rank waited in the alignment barrier before this run "
                "(outside the run's own times); run i is the same step on every rank."
            ),
        ]
        | UnsetType
    ) = UNSET
    communication: Communication | UnsetType = UNSET
    phases: (
        Annotated[list[Phase], Meta(description="Generate-like runs (phase_split): the run's phases in order.")]
        | UnsetType
    ) = UNSET
    generation: Generation | UnsetType = UNSET

    def top_nodes(self) -> list[TreeNode] | list[RegionShare]:
        """The run's region tree, or its flat regions where it has none (or an empty one)."""
        return self.tree if self.tree is not UNSET and self.tree else self.regions


class InputShapes(Record):
    """Distinct tensor-shape signatures of the region's calls in the profiler warmup run, and up to 3 of
    them (argument path to shape)."""

    distinct: Count
    examples: Annotated[list[dict[str, list[Dimension]]], Meta(max_length=3)]


class RegionMeta(Record):
    id: Name
    name: str
    kind: Literal[
        "aot_managed_module", "jit_managed_module", "untuned_module", "compiled_module", "aot_module", "jit_module"
    ]
    module_type: str | UnsetType = UNSET
    wrapper_state: str | UnsetType = UNSET
    parent: (
        Annotated[str, Meta(description="The region of the enclosing instrumented module (nested regions).")]
        | UnsetType
    ) = UNSET
    method: (
        Annotated[
            str,
            Meta(
                description="Set on an entry-method region (vae.decode): the method's name; the module's path is the "
                "region's name without it."
            ),
        ]
        | UnsetType
    ) = UNSET
    input_shapes: InputShapes | UnsetType = UNSET
    stateful_io: (
        Annotated[
            Literal[True],
            Meta(
                description="Set when a call of the region, in the capture's shape-recording run, took or returned an "
                "object with state (neither a tensor, number, string nor None, nor a list, tuple or mapping of them: a "
                "key-value cache): ONNX Runtime cannot run it and dynamo pays more per call (the gain model's "
                "stateful_call_us)."
            ),
        ]
        | UnsetType
    ) = UNSET
    call_structure_us: (
        Annotated[
            float,
            Meta(
                ge=0,
                le=1_000_000,
                description="Least host µs, over the first calls of the capture's shape-recording run, of taking a "
                "call's arguments apart into tensors and building its output again from them: what a tuned wrapper "
                "pays per call on top of its graph (a Hugging Face ModelOutput costs tens of µs). The gain model adds "
                "it to a tuned call.",
            ),
        ]
        | UnsetType
    ) = UNSET
    outside_root_forward: (
        Annotated[
            Literal[True],
            Meta(
                description="Set on a region whose every call, in the capture's shape-recording run, came from the "
                "root module's entry method outside the root's forward (a generate's encoder): tuning the root module "
                "whole leaves it eager."
            ),
        ]
        | UnsetType
    ) = UNSET
    call_lengths: (
        Annotated[
            list[Count | None],
            Meta(
                max_length=4096,
                description="Top-level regions called more than once: the tokens each call took (dimension 1 of its "
                "token argument, null when it has none), in call order, in the capture's shape-recording run; the "
                "evidence that splits a generate into phases (phase_split).",
            ),
        ]
        | UnsetType
    ) = UNSET


class OperatorRow(Record):
    key: str
    count: Count
    device_type: str | UnsetType = UNSET
    self_cpu_time_total_us: Figure | UnsetType = UNSET
    cpu_time_total_us: Figure | UnsetType = UNSET
    self_device_time_total_us: Figure | UnsetType = UNSET
    device_time_total_us: Figure | UnsetType = UNSET


class AITuneOperatorTable(Record):
    """NVIDIA AITune's operator table: the rows under ``events``."""

    events: list[OperatorRow]
    sort_by: str | UnsetType = UNSET
    row_limit: Count | UnsetType = UNSET


class Profiler(Record):
    activities: list[str] | UnsetType = UNSET
    mode: (
        Annotated[
            Literal["full", "lite"],
            Meta(
                description="full: operators traced by torch.profiler; lite: runs and regions timed by a clock, no "
                "profiler, so no key_averages, residual causes or operator mixes (optional; absent means full)."
            ),
        ]
        | UnsetType
    ) = UNSET
    trace_kind: (
        Annotated[
            Literal["aitune", "aitune-0.6", "torch.profiler"],
            Meta(
                description="What the events came from: an aitune capture, NVIDIA AITune 0.6's profile, or a plain "
                "torch.profiler session (optional; absent in AITune's own files)."
            ),
        ]
        | UnsetType
    ) = UNSET
    key_averages: (
        Annotated[
            dict[str, list[OperatorRow] | AITuneOperatorTable],
            Meta(
                description="Operator tables by sort key: a list of rows (aitune), or NVIDIA AITune's object with the "
                "rows under events."
            ),
        ]
        | UnsetType
    ) = UNSET


class DocumentWarning(Record):
    code: Code
    message: str
    source: str


class Summary(Record):
    count: Positive
    median: Figure
    mean: Figure
    std: Figure
    p10: Figure
    p90: Figure
    cv: Figure
    min: Figure
    max: Figure


class Statistics(Record):
    """Summaries over the measured runs."""

    runs: dict[str, Summary] | UnsetType = UNSET
    regions: (
        Annotated[
            list[dict[str, Summary | str]],
            Meta(description="Per region: its region_id, and a summary per figure (checked on the record)."),
        ]
        | UnsetType
    ) = UNSET
    residual: dict[str, Summary] | UnsetType = UNSET


class CaptureOverhead(Record):
    """Median measured run vs median steady uninstrumented warmup (the last four warmups, the cold first left
    out), with a 95% bootstrap interval of the ratio."""

    plain_wall_time_us: Microseconds
    captured_wall_time_us: Microseconds
    ratio: Rate
    plain_samples: Positive
    first_wall_time_us: (
        Annotated[Microseconds, Meta(description="The first, cold warmup: beyond the warm calls, the first-call cost.")]
        | UnsetType
    ) = UNSET
    ratio_low: Rate | UnsetType = UNSET
    ratio_high: Rate | UnsetType = UNSET


class Warmup(Record):
    """Uninstrumented warmups: at least the requested count, more (bounded) until their wall times stopped falling."""

    requested: Count
    performed: Count
    steady: bool
    wall_times_us: list[Microseconds] | UnsetType = UNSET
    set_aside: (
        Annotated[
            Count,
            Meta(
                description="Measured runs set aside as warmups because the run time was still falling (present when "
                "above 0): the last of wall_times_us."
            ),
        ]
        | UnsetType
    ) = UNSET


class Distributed(Record):
    """One rank of a torch.distributed job; its files are in the rank<r>/ folder of the capture. host_index is
    the index of this rank's host among the job's sorted distinct host names (never the name)."""

    rank: Count
    world_size: Positive
    local_rank: Count | UnsetType = UNSET
    backend: str | UnsetType = UNSET
    host_index: Count | UnsetType = UNSET


class PhaseSplit(Record):
    """Present when the runs are generate-like: how each run splits into phases (runs[i].phases) and on what
    evidence."""

    method: Annotated[
        Literal["input_lengths", "call_order"],
        Meta(
            description="input_lengths: the step region's recorded token counts (regions[].call_lengths) show a "
            "prompt read first, then one token per call; call_order: under a generate method, the first call of the "
            "step region is the prefill."
        ),
    ]
    basis: Annotated[str, Meta(description="The evidence, in one sentence.")]
    step_region: Annotated[
        Name,
        Meta(
            description="The region called once per new token (HF generate's model or decoder, or the module a loop "
            "calls)."
        ),
    ]
    phases: Annotated[list[PhaseName], Meta(min_length=1)]
    encoder_regions: (
        Annotated[list[str], Meta(description="The regions called before the first step: the encoder phase's.")]
        | UnsetType
    ) = UNSET
    within: (
        Annotated[str, Meta(description="The spanning region the steps run under (e.g. untuned_module:generate).")]
        | UnsetType
    ) = UNSET
    prompt_tokens: Annotated[Count, Meta(description="The tokens of the step region's first call.")] | UnsetType = UNSET


class MemoryStats(Record):
    allocated_bytes: Annotated[
        Count, Meta(description="Bytes allocated while it ran (on its thread), summed over its calls.")
    ]
    freed_bytes: Annotated[Count, Meta(description="Bytes freed while it ran: its own allocations or older ones.")]
    peak_live_bytes: Annotated[
        Count,
        Meta(
            description="The most bytes its own allocations held alive at once above what was live when it was "
            "entered; the highest of its calls."
        ),
    ]
    allocator_peak_bytes: (
        Annotated[
            Count,
            Meta(
                description="The allocator's own count of live bytes at its highest while it ran (CUDA: every live "
                "tensor of the device; CPU: counted from the profiler session's start) (optional)."
            ),
        ]
        | UnsetType
    ) = UNSET


MemoryByDevice = Annotated[dict[MemoryDevice, MemoryStats], Meta(max_length=16)]


class MemoryRegion(Record):
    region_id: str
    calls: Positive
    devices: MemoryByDevice


class MemoryRun(Record):
    run_index: Count
    devices: Annotated[MemoryByDevice, Meta(description="The whole run's memory, per device.")]
    regions: Annotated[
        list[MemoryRegion],
        Meta(
            description="Every region entered in the run, at any level, inclusive of the regions nested in it, its "
            "calls summed (peaks: the highest call's)."
        ),
    ]


class Memory(Record):
    """Memory per run, region and device from the profiler's memory events (profile_memory): the CPU
    allocator's, and the CUDA caching allocator's on a GPU. Recorded only in runs that are not the measured
    runs' timing (runs_from says which); absent in a lite document; event_count 0 and no runs when the trace
    holds no memory events (none recorded, not zero bytes). See docs/memory.md (optional)."""

    runs_from: Annotated[
        Literal["operator_runs", "memory_run", "runs"],
        Meta(
            description="Which runs the memory comes from: the document's operator_runs (a clock-timed capture's "
            "traced runs, which record memory), one memory_run of its own before the measured runs (a capture with "
            "the profiler in every measured run), or the measured runs (a trace another tool recorded with memory)."
        ),
    ]
    event_count: Annotated[Count, Meta(description="Memory events the trace holds in those runs' session.")]
    devices: (
        Annotated[
            list[MemoryDevice],
            Meta(max_length=16, description="The devices whose allocators recorded events (cpu, cuda:0)."),
        ]
        | UnsetType
    ) = UNSET
    runs: list[MemoryRun] | UnsetType = UNSET


class MachinePeak(Record):
    gemm_flops_per_s: Annotated[dict[str, Rate], Meta(description="Best torch.mm rate per dtype (FLOP/s).")]
    copy_bytes_per_s: Annotated[
        Rate, Meta(description="Best rate of a large tensor copy, bytes read + written per second.")
    ]
    source: str


class GainCalibration(Record):
    """The gain model's figures for this machine (aitune.torch.calibration), measured once and cached: what
    suggest predicts with. Bounded here as figures; a reader falls back to defaults for one out of its range."""

    eager_op_us: Microseconds | UnsetType = UNSET
    tuned_op_us: Microseconds | UnsetType = UNSET
    tuned_call_us: Microseconds | UnsetType = UNSET
    arithmetic: Annotated[dict[str, Rate], Meta(description="Tuned speedup per operator kind.")] | UnsetType = UNSET
    source: str | UnsetType = UNSET
    stateful_call_us: Microseconds | UnsetType = UNSET
    device: str | UnsetType = UNSET


class Environment(Record):
    """Versions, device names and thread counts of the capturing process, and the machine's measured figures;
    never user names, host names, environment variables or paths."""

    aitune_version: str | UnsetType = UNSET
    python: str | UnsetType = UNSET
    implementation: str | UnsetType = UNSET
    os: str | UnsetType = UNSET
    machine: str | UnsetType = UNSET
    cpu_count: Count | UnsetType = UNSET
    torch: str | UnsetType = UNSET
    torch_threads: Count | UnsetType = UNSET
    cuda: str | UnsetType = UNSET
    cuda_available: bool | UnsetType = UNSET
    cudnn: str | UnsetType = UNSET
    devices: list[str] | UnsetType = UNSET
    gain_calibration: GainCalibration | UnsetType = UNSET
    machine_peaks: (
        Annotated[
            dict[str, MachinePeak],
            Meta(
                description="This machine's measured roofs per backend (cpu, cuda): a short calibration, cached per "
                "machine (aitune.torch.peaks)."
            ),
        ]
        | UnsetType
    ) = UNSET
    capture_eager_op_us: (
        Annotated[
            Microseconds,
            Meta(description="The gain model's eager chain timed between the measured runs (µs per operator, median)."),
        ]
        | UnsetType
    ) = UNSET


class RankSpread(Record):
    median_us: Annotated[list[Microseconds], Meta(min_length=1)]
    slowest_rank: Count
    imbalance: (
        Annotated[
            float,
            Meta(ge=1, le=MAX_FIGURE, description="max ÷ median of the ranks' medians; absent when the median is 0."),
        ]
        | UnsetType
    ) = UNSET


class RankRegion(RankSpread, kw_only=True):
    region_id: Name


class RankTimes(Record):
    rank: Count
    source: str
    run_times_us: list[Microseconds]
    region_times_us: dict[str, list[Microseconds]]
    local_rank: Count | UnsetType = UNSET
    host_index: Count | UnsetType = UNSET
    backend: str | UnsetType = UNSET
    barrier_wait_us: list[Microseconds] | UnsetType = UNSET


class Straggler(Record):
    rank: Count
    median_us: Microseconds
    others_median_us: Microseconds
    region_id: Name
    region_excess_us: Figure


class Ranks(Record):
    """A merged document (aitune-profile merge): runs[i] is run i of the rank slowest in step i (runs[i].rank);
    here what only a merge knows. Times are µs in the given domain; lists by rank are indexed by rank."""

    world_size: Positive
    domain: Domain
    critical_rank: Annotated[
        Count,
        Meta(description="The rank with the slowest median step: the operator table, target and environment are its."),
    ]
    step_ranks: list[Count]
    run_time: RankSpread
    regions: Annotated[
        list[RankRegion],
        Meta(description="Every region (nested ones included) and the residual, labelled (residual)."),
    ]
    per_rank: Annotated[list[RankTimes], Meta(min_length=1)]
    stragglers: list[Straggler]
    backend: str | UnsetType = UNSET


OperatorRuns = Annotated[
    list[Run],
    Meta(
        min_length=1,
        description="Runs of their own that traced operators, after the measured runs, when the measured runs were "
        "timed by a clock (profiler.mode full, config.operator_runs a count): their residual causes, operator mixes, "
        "device times and communication; profiler.key_averages totals them. runs and statistics hold the measured "
        "runs' timing (optional).",
    ),
]
SpanningRegions = Annotated[
    list[Name],
    Meta(
        min_length=1,
        description="Regions every measured run is spent inside of, outermost first (e.g. a root entry method such as "
        "generate): runs[i].regions and statistics list the level below them, runs[i].residual holds their self time, "
        "and runs[i].tree keeps them at the top.",
    ),
]


class Section(Record):
    """What the top level and each scenario hold alike: runs, regions and what is measured of them."""

    runs: list[Run]
    regions: list[RegionMeta]
    warnings: list[DocumentWarning]
    input: Input | UnsetType = UNSET
    operator_runs: OperatorRuns | UnsetType = UNSET
    profiler: Profiler | UnsetType = UNSET
    statistics: Statistics | UnsetType = UNSET
    capture_overhead: CaptureOverhead | UnsetType = UNSET
    warmup: Warmup | UnsetType = UNSET
    trace_file: str | UnsetType = UNSET
    spanning_regions: SpanningRegions | UnsetType = UNSET
    phase_split: PhaseSplit | UnsetType = UNSET
    memory: Memory | UnsetType = UNSET

    def traced_runs(self) -> list[Run]:
        """The runs that traced operators (their residual causes and operator mixes, the runs the operator
        table totals): the operator runs of a capture whose measured runs a clock timed, else the measured
        runs (none of which did, in a lite document)."""
        return self.runs if self.operator_runs is UNSET else self.operator_runs


class Scenario(Section, kw_only=True):
    """One more input of the same capture (``--scenario``), measured like the top level."""

    name: Name


class Profile(Section, kw_only=True):
    """The written contract of a profile. Times are microseconds (floats), fractions are in [0, 1]; a time
    domain with no data is omitted, never null. Readers tolerate unknown keys."""

    schema_version: Literal[1]
    created_at: str
    aitune_version: str
    config: Config
    target: Target
    input: Input
    profiler: Profiler
    environment: Environment | UnsetType = UNSET
    ranks: Ranks | UnsetType = UNSET
    scenarios: Annotated[list[Scenario], Meta(min_length=1)] | UnsetType = UNSET
    distributed: Distributed | UnsetType = UNSET


T = TypeVar("T")


ProfileLike = Profile | Mapping[str, Any]
"""What a reader takes: the typed record (what `aitune.report.io.load` gives) or a document's JSON form (a
capture's, a test's dict), which `as_profile` converts."""


def as_profile(doc: ProfileLike) -> Profile:
    """``doc`` as the typed record every reader reads: itself (what `aitune.report.io.load` gives of a file), or
    a document's dict (a capture's, a test's) converted once per `aitune.report.memo.computed_once` block.

    `ProfileError` naming the JSON path for a dict that is no valid document (a file is refused earlier, by
    `aitune.report.io.load`).
    """
    if isinstance(doc, Profile):
        return doc
    return derived(doc, "typed", lambda: _converted(doc))


def _converted(doc: Mapping[str, Any]) -> Profile:
    try:
        return msgspec.convert(doc, Profile)
    except msgspec.ValidationError as error:
        raise ProfileError(
            f"not a valid profile document: {error}; pass one `aitune-profile validate` accepts."
        ) from None


def json_form(record: msgspec.Struct) -> Any:
    """A document's record (or one of its parts) in its JSON form (dicts, lists, strings and numbers; `UNSET`
    fields left out), in the model's key order, for what writes a document out or builds a new one from it
    (`aitune.report.io.dumps`, ``save``, a history's store): the one way back from the record to JSON data."""
    return msgspec.to_builtins(record)


def given(value: T | UnsetType, default: T) -> T:
    """``value``, or ``default`` where the document leaves it out (`UNSET`)."""
    return default if value is UNSET else value


TimedRecord = Timing | DomainTimes | RegionShare | TreeNode
"""A record with a time per domain: a run's timing, a residual, a region's share, a tree node."""


def time_in(record: TimedRecord, domain: Domain) -> float | None:
    """The record's time in ``domain`` (µs, the total for a tree node); None where it has no device time."""
    value = record.device_time_us if domain == "device" else record.cpu_time_us
    return None if value is UNSET else value


def fraction_in(record: DomainTimes | RegionShare | TreeNode, domain: Domain) -> float | None:
    """The record's share of its run in ``domain``; None where it has no device time."""
    value = record.device_time_fraction if domain == "device" else record.cpu_time_fraction
    return None if value is UNSET else value


def self_time_in(node: TreeNode, domain: Domain) -> float | None:
    """A tree node's self time in ``domain`` (µs: what none of its children accounts for); None without device time."""
    value = node.device_self_time_us if domain == "device" else node.cpu_self_time_us
    return None if value is UNSET else value
