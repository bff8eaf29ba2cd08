"""The tuning plan: what a tuning run chose, per region, so a freshly built model gets it without searching again.

A plan lists each tuned region's path (from the discovery root, as ``aitune.torch.wrap`` takes it),
the module type it was tuned on, the winning backend of each recorded graph with its configuration,
the tolerance of the gate, the measured speedup and the environment it was made in. Applying it
builds only the chosen backends, each behind the same correctness gate on synthetic inputs of the
recorded shapes; a graph whose backend fails there runs eager.

A plan is shared ("tune once, apply many times"), so it is data from a stranger: it is read through
the bounded reader, checked against ``plan.schema.json`` beside this module and against the limits
below (each says why) before anything is built, and only the keys this version knows are kept
(`normalised`). A plan written after applying one is made from the wrappers put in place, never
copied from the file. Every refusal is one `TuningError` sentence naming the file, the field, the
value cut short and the fix.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

import aitune
from aitune.compare.quality import TaskJudgment
from aitune.errors import ProfileError, TuningError
from aitune.report.io import read_json
from aitune.report.validate import json_path, non_finite, shortened
from aitune.torch.backends import BACKENDS
from aitune.torch.decoder_recipe import swap_generation
from aitune.torch.graphs.graph_spec import check_graph
from aitune.torch.performance.environment import environment
from aitune.torch.performance.regions import qualified_type
from aitune.torch.precision import precision_unavailable
from aitune.torch.tuning.outcome import RegionOutcome
from aitune.torch.tuning.paths import module_at, replace_modules
from aitune.torch.tuning.wrapper import Module, check_restorable

PLAN_KIND = "aitune-plan"
PLAN_SCHEMA_VERSION = 1
ENVIRONMENT_KEYS = ("torch", "cuda", "devices", "machine")
"""The environment facts a tuned backend depends on; a plan applied where one differs gets a warning."""

MAX_PLAN_BYTES = 16 * 2**20
"""Largest plan.json read: a plan of 256 regions of 64 graphs each is under 4 MB."""

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

if TYPE_CHECKING:
    import jsonschema

SCHEMA_FILE = "plan.schema.json"
_FIX = "tune again to write a new plan, or pass the plan.json tune wrote"


@dataclass(frozen=True)
class TunedRegion:
    """One region a loop tuned: its path, how (``aot`` or ``jit``), the module and its saved graphs and backends."""

    path: str
    mode: str
    module: nn.Module
    saved: dict[str, Any]  # the `Module.to_dict` form
    report: RegionOutcome | None  # what its tuning gave (None: replayed from a plan)

    @property
    def backends(self) -> dict[str, Any]:
        """The non-eager backend of each graph, by graph id."""
        return {graph: backend for graph, backend in self.saved["tuned_backends"].items() if backend["name"] != "eager"}

    @property
    def precision(self) -> str:
        return backends_precision(self.backends)


def backends_precision(backends: Mapping[str, Mapping[str, Any]]) -> str:
    """The level a region's ``backends`` (by graph id, as a plan holds them) compute at: the reduced one any of
    them runs, else fp32. A plan's region records it, and replaying the backends rebuilds it."""
    levels = {getattr(BACKENDS.get(backend["name"]), "precision", "fp32") for backend in backends.values()}
    return next((level for level in sorted(levels) if level != "fp32"), "fp32")


@dataclass(frozen=True)
class AppliedPlan:
    """The wrappers a plan put in place, by path, and the environment differences it warned about."""

    wrappers: dict[str, Module]
    environment_differences: list[str]
    generation_before: dict[str, Any] | None = None  # the generate settings the plan's replaced, to set back


def make_plan(
    target_type: str,
    tuned: Sequence[TunedRegion],
    tolerance: Mapping[str, Any],
    *,
    precision: str = "fp32",
    task_gate: TaskJudgment | None = None,
    process_memory: Mapping[str, Any] | None = None,
    generation: Mapping[str, str] | None = None,
    distributed: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The plan of the ``tuned`` regions; a region whose every graph kept eager is left out. ``precision`` is the
    level tuned at, ``task_gate`` the verdict that admitted its reduced-precision regions (the figure kept),
    ``generation`` the ``generate`` settings the regions were tuned under (`aitune.torch.decoder_recipe`).

    Each region's ``held_memory`` is what its winning backends were measured to hold beside its module
    (`region_held_memory`); ``process_memory`` the process's resident bytes before and after tuning;
    ``distributed`` the job's world size and per-rank figures under torchrun (`aitune.compare.ranks.rank_figures`).
    """
    regions = [
        {
            "path": region.path,
            "mode": region.mode,
            "module_type": qualified_type(region.module),
            "precision": region.precision,
            "backends": region.backends,
            "speedup_vs_eager": region.report.speedup_vs_eager if region.report is not None else None,
            **({"held_memory": held} if region.report is not None and (held := region.report.held_memory) else {}),
            "wrapper": region.saved,
        }
        for region in tuned
        if region.backends
    ]
    return {
        "schema_version": PLAN_SCHEMA_VERSION,
        "kind": PLAN_KIND,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "aitune_version": aitune.__version__,
        "target": {"type": target_type},
        "tolerance": {"rtol": tolerance.get("rtol"), "atol": tolerance.get("atol")},
        "precision": precision,
        "task_gate": _task_gate(task_gate.to_dict()) if task_gate is not None else None,
        **({"generation": dict(generation)} if generation else {}),
        # The gain model's calibration belongs to profiles (suggest reads it there), not to a plan.
        "environment": environment(),
        **({"process_memory": dict(process_memory)} if process_memory else {}),
        **({"distributed": dict(distributed)} if distributed else {}),
        "regions": regions,
    }


def load_plan(plan: str | Path | Mapping[str, Any]) -> dict[str, Any]:
    """A plan given as a path or as the loaded dict, checked and normalised: `checked_plan` of what was read.

    A path is read through the profile reader's bounds (`aitune.report.io.read_json`): a regular file
    of at most `MAX_PLAN_BYTES`, nested at most as deep as a profile may be. `TuningError`, one
    sentence naming the file, the field and the fix, for anything else.
    """
    if isinstance(plan, Mapping):
        return checked_plan(plan, "the plan")
    return checked_plan(_read(Path(plan)), str(plan))


def checked_plan(data: Any, where: str = "the plan") -> dict[str, Any]:
    """``data`` as a plan: checked against `plan_schema` and the limits below, then rebuilt from the
    known keys only (`normalised`); `TuningError` with the first problem, before anything is built."""
    _check_header(data, where)
    problems = schema_problems(data) or _limit_problems(data)
    if problems:  # a problem that is a whole sentence (the structure parser's) carries its own fix
        problem = problems[0]
        raise TuningError(f"{where}: {problem}" if problem.endswith(".") else f"{where}: {problem}; {_FIX}.")
    return normalised(data)


def normalised(plan: Mapping[str, Any]) -> dict[str, Any]:
    """A checked plan rebuilt from the keys this version knows, in the order tune writes them.

    Unknown keys are dropped, so nothing a stranger added to a plan travels into the next one.
    """
    tolerance = plan.get("tolerance", {})
    return {
        "schema_version": PLAN_SCHEMA_VERSION,
        "kind": PLAN_KIND,
        **{key: plan[key] for key in ("created_at", "aitune_version") if key in plan},
        "target": {key: value for key, value in plan.get("target", {}).items() if key == "type"},
        "tolerance": {"rtol": tolerance.get("rtol"), "atol": tolerance.get("atol")},
        "precision": plan.get("precision", "fp32"),
        "task_gate": _task_gate(plan["task_gate"]) if plan.get("task_gate") is not None else None,
        **({"generation": dict(plan["generation"])} if plan.get("generation") else {}),
        "environment": dict(plan.get("environment", {})),
        **({"process_memory": dict(plan["process_memory"])} if "process_memory" in plan else {}),
        **({"distributed": dict(plan["distributed"])} if "distributed" in plan else {}),
        "regions": [_normalised_region(region) for region in plan["regions"]],
    }


def replayed_plan(
    target_type: str,
    tuned: Sequence[TunedRegion],
    applied: Mapping[str, Any],
    *,
    task_gate: TaskJudgment | None = None,
    process_memory: Mapping[str, Any] | None = None,
    distributed: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The plan of a run that applied the checked plan ``applied``: made from the wrappers now in place
    (never a copy of the file), with the tolerance, precision and speedups ``applied`` gave, the task
    gate's verdict of this run (``task_gate``) and the process memory it measured."""
    made = make_plan(
        target_type,
        tuned,
        applied["tolerance"],
        precision=applied["precision"],
        task_gate=task_gate,
        process_memory=process_memory,
        generation=applied.get("generation") if tuned else None,
        distributed=distributed,
    )
    claimed = {region["path"]: region.get("speedup_vs_eager") for region in applied["regions"]}
    for region in made["regions"]:
        region["speedup_vs_eager"] = claimed.get(region["path"])
    return made


@cache
def plan_schema() -> dict[str, Any]:
    """The plan JSON Schema shipped beside this module: the single written definition of plan.json."""
    return json.loads(resources.files(__package__).joinpath(SCHEMA_FILE).read_text())


@cache
def _validator() -> jsonschema.Draft202012Validator:
    import jsonschema  # on first use: importing it costs about a second, and most imports of this module never check

    return jsonschema.Draft202012Validator(plan_schema())


def schema_problems(data: Any) -> list[str]:
    """Every violation of `plan_schema` by ``data``, each ``<JSON path>: <value> <what is wrong>``; [] when valid.

    The one place the schema engine is called, so another engine can take its place.
    """
    errors = sorted(_validator().iter_errors(data), key=lambda error: list(map(str, error.absolute_path)))
    return [_schema_problem(error) for error in errors]


def _schema_problem(error: jsonschema.ValidationError) -> str:
    """``regions[0].path: 'encoder.body.²' is not a dotted path as wrap takes it …``: the schema's
    description of the field says what was wanted, where it has one."""
    value = shortened(repr(error.instance))
    wanted = error.schema.get("description") if isinstance(error.schema, Mapping) else None
    if error.validator in ("pattern", "enum", "const") and wanted:
        message = f"{value} is not {wanted}"
    elif error.validator == "const":
        message = f"{value} is not {error.validator_value!r}"
    elif error.validator in _UNITS:
        message = f"{value} is too long (at most {error.validator_value} {_UNITS[error.validator]})"
    elif error.validator == "additionalProperties":
        known = ", ".join(error.schema.get("properties", {})) or "none"
        message = f"{error.message.split(' (')[-1].rstrip(')')} here (known: {known})"
    else:
        message = error.message.replace(repr(error.instance), value, 1)
        if wanted:
            message += f" ({wanted})"
    return f"{json_path(error.absolute_path)}: {message}"


_UNITS = {"maxItems": "items", "maxLength": "characters", "maxProperties": "keys"}


def _read(path: Path) -> Any:
    """The JSON at ``path`` through the one bounded reader (regular files only), with a plan's fix."""
    try:
        return read_json(path, MAX_PLAN_BYTES)
    except ProfileError as error:  # the reader's sentence, with a plan's fix in place of a profile's
        what = str(error).rstrip(".").split("; ")[0]
        raise TuningError(f"{what}; {_FIX}.") from None


def _check_header(data: Any, where: str) -> None:
    """`TuningError` unless ``data`` is an object of kind `PLAN_KIND` with ``schema_version`` the integer 1."""
    if not isinstance(data, Mapping) or data.get("kind") != PLAN_KIND:
        raise TuningError(f'{where} is not an aitune plan (no "kind": "{PLAN_KIND}"); {_FIX}.')
    version = data.get("schema_version")
    if type(version) is not int or version != PLAN_SCHEMA_VERSION:  # neither true nor 1.0: JSON Schema admits 1.0
        newer = type(version) is int and version > PLAN_SCHEMA_VERSION
        fix = "upgrade aitune" if newer else f"write the integer {PLAN_SCHEMA_VERSION}, or tune again"
        raise TuningError(
            f"{where} has plan schema_version {shortened(repr(version))}; this aitune reads version "
            f"{PLAN_SCHEMA_VERSION}: {fix}."
        )


def _limit_problems(plan: Mapping[str, Any]) -> list[str]:
    """What the schema cannot say: finite numbers, distinct and disjoint paths, each graph's shapes
    against its structure and `MAX_EXAMPLE_ELEMENTS`, thread counts against this machine."""
    problems = [f"{json_path(path)}: {value} is not a finite number" for path, value in non_finite(plan)]
    problems += _path_problems([region["path"] for region in plan["regions"]])
    for index, region in enumerate(plan["regions"]):
        where = f"regions[{index}].wrapper"
        wrapper = region["wrapper"]
        for number, graph in enumerate(wrapper["graphs"]):
            problems += _graph_problems(graph, f"{where}.graphs[{number}]")
        known = {graph["graph_id"] for graph in wrapper["graphs"]}
        for graph_id, backend in wrapper["tuned_backends"].items():
            if graph_id not in known:
                problems.append(f"{where}.tuned_backends.{graph_id}: no graph of that id in {where}.graphs")
            problems += _backend_problems(backend, f"{where}.tuned_backends.{graph_id}", plan.get("precision", "fp32"))
    return problems


def _path_problems(paths: list[str]) -> list[str]:
    """Each path once, and none inside another: wrapping a module and its child together is never tuned."""
    problems = []
    for index, path in enumerate(paths):
        for other in paths[:index]:
            if path == other:
                problems.append(f"regions[{index}].path: {path!r} appears twice")
            elif path.startswith(f"{other}.") or other == "" or path == "" or other.startswith(f"{path}."):
                problems.append(f"regions[{index}].path: {path!r} and {other!r} nest; a plan tunes disjoint regions")
    return problems


def _graph_problems(graph: Mapping[str, Any], where: str) -> list[str]:
    """The graph's shapes (`_shape_problems`), then its structure against them (`_structure_problems`)."""
    return _shape_problems(graph, where) or _structure_problems(graph, where)


def _shape_problems(graph: Mapping[str, Any], where: str) -> list[str]:
    """One min and one max shape per input, of one length, min ≤ max, and the example built at the max
    shapes holding at most `MAX_EXAMPLE_ELEMENTS`: checked before anything is allocated."""
    low, high = graph["min_shapes"], graph["max_shapes"]
    if len(low) != len(high):
        return [f"{where}.min_shapes: {len(low)} shapes, but max_shapes has {len(high)}"]
    elements = 0
    for index, (small, large) in enumerate(zip(low, high, strict=True)):
        if (small is None) != (large is None) or (small is not None and len(small) != len(large)):
            return [f"{where}.min_shapes[{index}]: {shortened(repr(small))} does not match max_shapes {large}"]
        if large is None:
            continue
        if any(a > b for a, b in zip(small, large, strict=True)):
            return [f"{where}.min_shapes[{index}]: {small} exceeds the max_shapes {large}"]
        elements += math.prod(large)
        if elements > MAX_EXAMPLE_ELEMENTS:
            return [
                f"{where}.max_shapes[{index}]: {shortened(repr(large))} brings the example input to {elements:,} "
                f"elements, over the {MAX_EXAMPLE_ELEMENTS:,} a plan may ask for (the gate builds that input and "
                "runs the module on it, so the shapes decide the memory used)"
            ]
    return []


def _structure_problems(graph: Mapping[str, Any], where: str) -> list[str]:
    """The structure parsed by `aitune.torch.graphs.graph_spec.check_graph` (never a loader that can
    import), its id and its leaves against the shapes; its sentence, when it refuses."""
    try:
        check_graph(graph, where)
    except TuningError as error:
        return [str(error)]
    return []


def _backend_problems(backend: Mapping[str, Any], where: str, precision: str) -> list[str]:
    """A backend of the plan's precision (a reduced one is never applied where the plan says fp32); a thread
    count no larger than this machine's CPUs (the schema already bounds it by `MAX_THREADS`)."""
    level = getattr(BACKENDS.get(backend["name"]), "precision", "fp32")
    if level != "fp32" and level != precision:
        return [
            f"{where}.name: {backend['name']} computes in {level}, but the plan's precision is {precision} "
            "(a reduced precision is applied only by a plan made at it, after the task gate)"
        ]
    threads = backend.get("config", {}).get("intra_op_threads", 0)
    cpus = os.cpu_count() or 1
    if threads > cpus:
        return [
            f"{where}.config.intra_op_threads: {threads} threads is more than this machine's {cpus} CPUs "
            "(threads beyond the cores oversubscribe them and run slower)"
        ]
    return []


def _normalised_region(region: Mapping[str, Any]) -> dict[str, Any]:
    """A region with its known keys; its ``backends`` are its wrapper's non-eager ones, as `make_plan` writes."""
    wrapper = region["wrapper"]
    graph_keys = ("graph_id", "structure", "min_shapes", "max_shapes", "sample_count")
    tuned = {key: _normalised_backend(value) for key, value in wrapper["tuned_backends"].items()}
    backends = {key: value for key, value in tuned.items() if value["name"] != "eager"}
    return {
        "path": region["path"],
        "mode": region["mode"],
        "module_type": region["module_type"],
        "precision": backends_precision(backends),  # what its backends compute at, never the file's word for it
        "backends": backends,
        "speedup_vs_eager": region.get("speedup_vs_eager"),
        **({"held_memory": dict(region["held_memory"])} if "held_memory" in region else {}),
        "wrapper": {
            "type": wrapper["type"],
            "name": wrapper["name"],
            "state": wrapper["state"],
            "graphs": [{key: graph[key] for key in graph_keys if key in graph} for graph in wrapper["graphs"]],
            "tuned_backends": tuned,
        },
    }


TASK_GATE_KEYS = ("precision", "metric", "minimum", "value", "passed", "regions", "inputs", "first_divergence")


def _task_gate(gate: Mapping[str, Any]) -> dict[str, Any]:
    """The task gate's figure as a plan keeps it: the verdict's known keys (its regions are the plan's paths)."""
    return {key: gate.get(key) for key in TASK_GATE_KEYS}


def _normalised_backend(backend: Mapping[str, Any]) -> dict[str, Any]:
    return {"name": backend["name"], "config": dict(backend.get("config", {}))}


def apply_plan(
    obj: Any, plan: str | Path | Mapping[str, Any], *, device: torch.device | str | None = None
) -> AppliedPlan:
    """Put the plan's tuned wrappers into ``obj`` by path, building only each region's chosen backends.

    Every region comes back as an ``aitune.torch.Module`` (``aot_module:<path>`` in profiles), also one
    the loop tuned in JIT mode: the plan holds its graphs and backends, so nothing is left to discover.

    Refuses, before anything is changed, a plan that `load_plan` refuses, one whose path is missing under
    ``obj`` or holds a module of another type than the plan was made on, and one whose reduced-precision
    regions its task gate verdict does not admit (`task_gate_problem`: `tune --plan` judges them again on
    the workload, which this call does not have); warns
    (``UserWarning``) when the environment differs (torch version, CUDA, devices, machine). All or
    nothing: if a wrapper fails, the ones already put in place are removed again.

    Example::

        pipe = build_pipeline()
        aitune.torch.apply_plan(pipe, "aitune_tuned/plan.json")
        pipe(prompt)  # runs the backends the plan chose
    """
    data = load_plan(plan)
    check_fits(obj, data)
    unavailable = precision_unavailable(data["precision"], device or "cpu")
    if unavailable is not None:
        raise TuningError(f"the plan runs at precision {data['precision']}, which is refused here: {unavailable}.")
    unjudged = task_gate_problem(data)
    if unjudged is not None:  # without the workload nothing can judge the task here: the plan's verdict must hold
        raise TuningError(
            f"the plan's task gate {unjudged}, so its {data['precision']} regions are not applied; run "
            "`aitune-profile tune --plan PLAN` to judge them on your workload, or tune again."
        )
    entries = {entry["path"]: entry for entry in data["regions"]}
    differences = environment_differences(data.get("environment", {}), environment())
    if differences:
        warnings.warn(
            f"this plan was made with {'; '.join(differences)}: its backends are rebuilt and gated here, "
            "but their speedups may differ; tune again for figures of this environment.",
            UserWarning,
            stacklevel=2,
        )
    settings = data.get("generation")
    if settings and getattr(obj, "generation_config", None) is None:
        raise TuningError(
            f"the plan sets generate's {', '.join(f'{k}={v}' for k, v in settings.items())}, but this object has no "
            "generation_config; apply it to the transformers model it was tuned on."
        )
    wrappers = replace_modules(
        obj, list(entries), lambda path, module: Module.from_dict(module, entries[path]["wrapper"], device=device)
    )
    before = swap_generation(obj, settings) if settings else None  # after every wrapper is in place: all or nothing
    return AppliedPlan(wrappers=wrappers, environment_differences=differences, generation_before=before)


def task_gate_problem(plan: Mapping[str, Any]) -> str | None:
    """Why the checked ``plan``'s task gate verdict does not admit its reduced-precision regions (it is missing,
    of another precision, failed, lacks inputs or a region), or None when it does or the plan has none."""
    reduced = [region["path"] for region in plan["regions"] if region["precision"] != "fp32"]
    if not reduced:
        return None
    gate = plan.get("task_gate")
    if gate is None:
        return "holds no verdict"
    judgment = TaskJudgment.from_dict(gate)
    if judgment is None:
        return "is not a whole verdict (a precision, metric, bar, figure, regions and inputs)"
    if judgment.precision != plan["precision"]:
        return f"judged precision {judgment.precision}, not the plan's {plan['precision']}"
    if not judgment.passed or gate.get("passed") is not True:
        return f"did not pass ({judgment.metric} {judgment.value} against a bar of {judgment.minimum:g})"
    unjudged = [path for path in reduced if path not in judgment.regions]
    if unjudged:
        return f"never judged region '{unjudged[0]}'"
    return None


def check_fits(obj: Any, plan: Mapping[str, Any]) -> None:
    """`TuningError` unless every region of the checked ``plan`` finds, at its path under ``obj``, an
    unwrapped module of the type the plan was made on."""
    for entry in plan["regions"]:
        _check_matches(obj, entry["path"], entry)


def check_world_size(plan: Mapping[str, Any], world_size: int) -> None:
    """`TuningError` unless the checked ``plan`` was tuned for a job of ``world_size`` ranks (1: one process).

    Each rank's shard was timed and gated as it is at that size: at another, the shards differ.
    """
    made = plan.get("distributed", {}).get("world_size", 1)
    if made != world_size:
        raise TuningError(
            f"the plan was tuned for {_processes(made)} but this job runs {_processes(world_size)}; replay it under "
            f"the world size it was tuned for, or tune again at this one."
        )


def _processes(world_size: int) -> str:
    return "one process" if world_size == 1 else f"{world_size} ranks"


def environment_differences(made: Mapping[str, Any], here: Mapping[str, Any]) -> list[str]:
    """``"torch 2.11.0 (here 2.13.0)"`` for every fact in `ENVIRONMENT_KEYS` that differs."""
    return [
        f"{key} {made.get(key)} (here {here.get(key)})"
        for key in ENVIRONMENT_KEYS
        if key in made and made.get(key) != here.get(key)
    ]


def _check_matches(obj: Any, path: str, entry: Mapping[str, Any]) -> None:
    module = module_at(obj, path)
    if isinstance(module, Module):
        raise TuningError(f"'{path}' is already an aitune.torch.Module; apply the plan to a freshly built model.")
    found = qualified_type(module)
    if found != entry.get("module_type"):
        raise TuningError(
            f"the plan was made on a {entry.get('module_type')} at '{path}', but this model has a {found} there;"
            " apply it to the model it was tuned on, or tune this one."
        )
    check_restorable(entry["wrapper"], path)  # every region is checked before any is applied
