"""The tuning plan's one written definition, as `msgspec` Structs (no torch in this file).

Converting a plan into `Plan` checks it while it is read — types, ranges, enums, required fields,
every size that reaches an allocation — and names the JSON path of the first problem
(`aitune.torch.tuning.plan_check` renders it). What a type cannot say (finite numbers, disjoint paths,
shapes against their structure, threads against this machine) is checked on the typed record there.
``plan.schema.json`` beside this module is generated from these Structs for outside consumers
(`aitune.torch.tuning.plan_schema`); a test keeps the shipped file in step.

A part that names its keys tolerates unknown ones (they are dropped when the plan is rebuilt); the
parts a backend or a measurement owns refuse them, so a misspelt option is never silently ignored.
An optional key is `UNSET` when absent.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from msgspec import UNSET, Meta, Struct, UnsetType, defstruct, field

from aitune.markers import MAX_MODULE_PATH_CHARS, MODULE_PATH_PATTERN

PLAN_KIND = "aitune-plan"
PLAN_SCHEMA_VERSION = 1

MAX_REGIONS = 256
"""Most regions a plan may tune (``regions``): each is a wrapper and a backend build."""

MAX_GRAPHS = 64
"""Most graphs (input structures) of one region: each is a backend build and a correctness check."""

MAX_EXAMPLE_ELEMENTS = 2**23
"""Most elements the example input of one graph may hold (8,388,608; 32 MiB in float32): applying a plan
builds that input from the plan's shapes and runs the module on it for the correctness gate, so the
shapes decide how much memory is used (1×3×2000² made a conv stack peak at 1.7 GB). A batch of 32
RGB images of 224×224 is 4.8 M."""

MAX_THREADS = 1024
"""Most threads a backend configuration may ask for, and never more than this machine's CPUs: a count
beyond the cores oversubscribes them (2,000 ONNX Runtime threads ran 6× slower than one)."""

MAX_BYTES = 2**50
"""Largest byte count a plan states (a PiB): a measurement of memory, never more."""

_PRINTABLE = "^[^\\u0000-\\u001f\\u007f]*$"


def _printable(characters: int) -> Any:
    """Text without control characters (a terminal escape in a plan never reaches a screen), bounded."""
    return Annotated[
        str,
        Meta(
            max_length=characters,
            pattern=_PRINTABLE,
            description=f"printable text of at most {characters} characters",
        ),
    ]


Label = _printable(64)
Text = _printable(512)
ModulePath = Annotated[
    str,
    Meta(
        max_length=MAX_MODULE_PATH_CHARS,
        pattern=f"^{MODULE_PATH_PATTERN}$",
        description="a dotted path as wrap takes it: ASCII identifiers (not starting with __) and indices of "
        "at most 6 digits, at most 32 parts, e.g. unet.blocks.0",
    ),
]
GraphId = Annotated[str, Meta(pattern="^[0-9a-f]{12}$", description="a graph id: 12 hexadecimal digits")]
Precision = Annotated[
    Literal["fp32", "bf16", "int8"], Meta(description="a precision aitune tunes at: fp32, bf16 or int8")
]
Bytes = Annotated[int, Meta(ge=0, le=MAX_BYTES)]
Microseconds = Annotated[float, Meta(ge=0, le=1e15)]
Speedup = Annotated[float, Meta(ge=0, le=1e9)]
Rank = Annotated[int, Meta(ge=0, le=65535)]
Shape = (
    Annotated[
        list[Annotated[int, Meta(ge=0, le=MAX_EXAMPLE_ELEMENTS)]],
        Meta(
            max_length=16, description="a tensor's sizes: non-negative integers, at most 16 of them (null for a value)"
        ),
    ]
    | None
)
EnvironmentFact = Annotated[
    Text | int | float | bool | Annotated[list[Text], Meta(max_length=64)] | None,
    Meta(
        description="an environment fact: printable text of at most 512 characters, a number, true, false, null "
        "or a list of text"
    ),
]


class Part(Struct, kw_only=True):
    """A part of a plan: keyword fields, unknown keys ignored (and dropped when the plan is rebuilt)."""


class Measured(Part, forbid_unknown_fields=True):
    """A part that holds only what aitune measured: an unknown key is refused."""


class Target(Part):
    type: Text | UnsetType = UNSET


class PlanTolerance(Part):
    rtol: Annotated[float, Meta(ge=0, le=1e6)] | UnsetType | None = UNSET
    atol: Annotated[float, Meta(ge=0, le=1e6)] | UnsetType | None = UNSET


class TaskGate(Part):
    """The task gate's verdict on the plan's reduced-precision regions: the metric, its bar and the measured figure."""

    precision: Precision | UnsetType = UNSET
    metric: (
        Annotated[
            Literal["top1_agreement", "token_agreement", "psnr_db", "cosine"],
            Meta(description="a task metric: top1_agreement, token_agreement, psnr_db or cosine"),
        ]
        | UnsetType
    ) = UNSET
    minimum: Annotated[float, Meta(ge=-1, le=100)] | UnsetType = UNSET
    value: Annotated[float, Meta(ge=-1, le=100)] | UnsetType | None = UNSET
    passed: bool | UnsetType = UNSET
    regions: Annotated[list[_printable(1000)], Meta(max_length=MAX_REGIONS)] | UnsetType = UNSET
    inputs: Annotated[int, Meta(ge=0, le=1_000_000)] | UnsetType = UNSET
    first_divergence: Annotated[int, Meta(ge=0, le=2**31 - 1)] | UnsetType | None = UNSET


class Generation(Measured):
    """The generate settings the plan's regions were tuned under (the decoder recipe: a static cache); applying
    the plan sets them on the model's generation_config."""

    cache_implementation: Literal["static"] | UnsetType = UNSET


class ProcessMemory(Measured):
    """The process's resident bytes before and after tuning, and their difference: what tuning left in the
    process (the tuned backends, their libraries' start-up, the exporters' leftovers); measured, optional."""

    rss_before_bytes: Bytes | UnsetType | None = UNSET
    rss_after_bytes: Bytes | UnsetType | None = UNSET
    held_bytes: Bytes | UnsetType | None = UNSET
    measured_by: Literal["process_rss"] | UnsetType = UNSET


class RankFigures(Measured):
    rank: Rank
    before_us: Microseconds
    after_us: Microseconds
    speedup: Speedup | UnsetType | None = UNSET


class JobFigures(Measured):
    before_us: Microseconds
    after_us: Microseconds
    speedup: Speedup | UnsetType | None = UNSET


class Distributed(Measured):
    """The job this plan was tuned for under torchrun: its world size (a replay under another is refused), each
    rank's median run before and after tuning, the job's (each step as long as its slowest rank) and the slowest
    rank after tuning and the stragglers its capture before tuning named; absent for one process, optional."""

    world_size: Annotated[int, Meta(ge=2, le=65536)]
    ranks: Annotated[list[RankFigures], Meta(max_length=65536)] | UnsetType = UNSET
    job: JobFigures | UnsetType = UNSET
    slowest_rank: Rank | UnsetType = UNSET
    stragglers: Annotated[list[Annotated[str, Meta(max_length=2000)]], Meta(max_length=65536)] | UnsetType = UNSET


class HeldMemory(Measured):
    """What the region's winning backends were measured to hold beside its module (process resident bytes; a
    GPU's used bytes), summed over its graphs; optional."""

    host_bytes: Bytes | UnsetType | None = UNSET
    device_bytes: Bytes | UnsetType | None = UNSET


# --- backends: one Struct per backend, its name the tag, its config the options it takes ---


class EagerConfig(Measured):
    pass


class AutocastConfig(Measured):
    dtype: (
        Annotated[Literal["float16", "bfloat16"], Meta(description="a dtype autocast computes in: float16 or bfloat16")]
        | UnsetType
    ) = UNSET


class InductorConfig(Measured):
    mode: (
        Annotated[
            Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"] | None,
            Meta(description="one of torch.compile's modes (or null)"),
        ]
        | UnsetType
    ) = UNSET
    freezing: bool | UnsetType = UNSET
    dynamic: bool | UnsetType | None = UNSET


class OnnxruntimeConfig(Measured):
    intra_op_threads: (
        Annotated[
            int,
            Meta(
                ge=0,
                le=MAX_THREADS,
                description=f"threads: 0 for ONNX Runtime's default, else at most {MAX_THREADS} and never more than "
                "this machine's CPUs",
            ),
        ]
        | UnsetType
    ) = UNSET


class TensorrtConfig(Measured):
    fp16: bool | UnsetType = UNSET
    bf16: bool | UnsetType = UNSET
    workspace_gib: (
        Annotated[float, Meta(gt=0, le=1024, description="TensorRT's workspace: more than 0 and at most 1024 GiB")]
        | UnsetType
    ) = UNSET


class Bf16Config(Measured):
    compile: bool | UnsetType = UNSET


class Int8DynamicConfig(Measured):
    pass


class Backend(Part, tag_field="name"):
    """A backend this aitune knows, by ``name``, with the options it was chosen with (``config``)."""


BACKEND_CONFIGS: dict[str, type[Measured]] = {
    "eager": EagerConfig,
    "autocast": AutocastConfig,
    "inductor": InductorConfig,
    "onnxruntime": OnnxruntimeConfig,
    "tensorrt": TensorrtConfig,
    "bf16": Bf16Config,
    "int8_dynamic": Int8DynamicConfig,
}
"""Each backend's name and the options its config takes: one Struct per backend, its name the tag."""


def _backend(name: str, config: type[Measured]) -> type[Backend]:
    """The Struct of backend ``name``: ``{"name": name, "config": {...}}``, the config empty when absent."""
    return defstruct(
        config.__name__.replace("Config", "Backend"),
        [("config", config, field(default_factory=config))],
        bases=(Backend,),
        module=__name__,
        tag=name,
    )


AnyBackend = Union[tuple(_backend(name, config) for name, config in BACKEND_CONFIGS.items())]  # noqa: UP007
"""A backend of the plan, told apart by its ``name``."""
BackendsByGraph = Annotated[dict[GraphId, AnyBackend], Meta(max_length=MAX_GRAPHS)]


class Graph(Part):
    """One input structure a region was tuned on: its id, the structure and the smallest and largest shapes seen."""

    graph_id: GraphId
    structure: Annotated[
        Annotated[str, Meta(max_length=65536)] | list[Any] | dict[str, Any],
        Meta(description="the graph's input structure, parsed by aitune.torch.graphs.graph_spec"),
    ]
    min_shapes: Annotated[list[Shape], Meta(max_length=1024)]
    max_shapes: Annotated[list[Shape], Meta(max_length=1024)]
    sample_count: Annotated[int, Meta(ge=0, le=2**31 - 1)] | UnsetType = UNSET


class Wrapper(Part):
    """The saved ``aitune.torch.Module`` of a region: its graphs and the backend tuned for each."""

    type: Literal["aitune.aot_module/1"]
    name: Annotated[
        str,
        Meta(
            min_length=1,
            max_length=512,
            pattern="^[A-Za-z0-9_.\\-]+$",
            description="a wrapper name: letters, digits, _, . and -",
        ),
    ]
    state: Annotated[Literal["tuned"], Meta(description='"tuned", the only state a plan holds')]
    graphs: Annotated[list[Graph], Meta(max_length=MAX_GRAPHS)]
    tuned_backends: BackendsByGraph


class Region(Part, kw_only=True):
    """One tuned region: its path from the discovery root, its module type, and its wrapper."""

    path: ModulePath
    mode: Literal["aot", "jit"]
    module_type: Annotated[Text, Meta(min_length=1)]
    precision: (
        Annotated[
            Literal["fp32", "bf16", "int8"],
            Meta(
                description="the precision the region's backends compute at: fp32, bf16 or int8 (rebuilt from them "
                "when read)"
            ),
        ]
        | UnsetType
    ) = UNSET
    backends: (
        Annotated[
            BackendsByGraph,
            Meta(
                description="the wrapper's non-eager tuned_backends, repeated for readers; rebuilt from them when read"
            ),
        ]
        | UnsetType
    ) = UNSET
    speedup_vs_eager: Annotated[float, Meta(gt=0, le=1e6)] | UnsetType | None = UNSET
    held_memory: HeldMemory | UnsetType = UNSET
    wrapper: Wrapper


class Plan(Part, kw_only=True):
    """What a tuning run chose per region, to apply again without searching. Every size that reaches an
    allocation is bounded here or in aitune.torch.tuning.plan_check, which states why. Readers ignore unknown
    keys and writers drop them."""

    schema_version: Annotated[Literal[1], Meta(description="the integer 1")]
    kind: Literal["aitune-plan"]
    created_at: Label | UnsetType = UNSET
    aitune_version: Label | UnsetType = UNSET
    target: Target = field(default_factory=Target)
    tolerance: PlanTolerance = field(default_factory=PlanTolerance)
    precision: Precision = "fp32"
    task_gate: TaskGate | None = None
    generation: Generation | UnsetType | None = UNSET
    environment: Annotated[dict[str, EnvironmentFact], Meta(max_length=64)] = field(default_factory=dict)
    process_memory: ProcessMemory | UnsetType = UNSET
    distributed: Distributed | UnsetType = UNSET
    regions: Annotated[list[Region], Meta(max_length=MAX_REGIONS)]
