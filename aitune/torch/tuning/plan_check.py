"""Reading a plan: a file or a dict from a stranger, checked before anything is built, rebuilt from what was checked.

A plan is shared ("tune once, apply many times"), so it is data from a stranger: it is read through the
bounded reader, converted into the typed model (`aitune.torch.tuning.plan_model`, which states the
types and bounds), then checked on the typed record for what a type cannot say, and finally rebuilt
from the keys this version knows (`normalised`). Every refusal is one `TuningError` sentence naming
the file, the JSON path of the field, the value cut short and the fix.
"""

from __future__ import annotations

import math
import os
import re
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import msgspec

from aitune.errors import ProfileError, TuningError
from aitune.report.io import read_json
from aitune.report.problems import json_path, non_finite, problem_message, problems_in, shortened
from aitune.torch.backends import BACKENDS
from aitune.torch.graphs.graph_spec import check_graph
from aitune.torch.tuning.plan_model import (
    MAX_EXAMPLE_ELEMENTS,
    PLAN_KIND,
    PLAN_SCHEMA_VERSION,
    Backend,
    Graph,
    Plan,
    Region,
)

MAX_PLAN_BYTES = 16 * 2**20
"""Largest plan.json read: a plan of 256 regions of 64 graphs each is under 4 MB."""

FIX = "tune again to write a new plan, or pass the plan.json tune wrote"

TASK_GATE_KEYS = ("precision", "metric", "minimum", "value", "passed", "regions", "inputs", "first_divergence")


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
    """``data`` as a plan: converted into `Plan` and checked against the limits below, then rebuilt from the
    known keys only (`normalised`); `TuningError` with the first problem, before anything is built."""
    _check_header(data, where)
    typed, problems = _typed(data)
    if problems:  # a problem that is a whole sentence (the structure parser's) carries its own fix
        problem = problems[0]
        raise TuningError(f"{where}: {problem}" if problem.endswith(".") else f"{where}: {problem}; {FIX}.")
    assert typed is not None  # a plan without problems converted
    return normalised(typed)


def plan_problems(data: Any) -> list[str]:
    """Every problem of ``data`` as a plan, each ``<JSON path>: <value> <what is wrong>``; [] when valid.

    The problems of types and bounds, all of them; only when there are none, those of the typed record.
    """
    return _typed(data)[1]


def _typed(data: Any) -> tuple[Plan | None, list[str]]:
    """``data`` as a `Plan` and [], or None and its problems."""
    problems = [f"{json_path(path)}: {value} is not a finite number" for path, value in non_finite(data)]
    if problems:  # before the bounds, which a NaN fails in words that do not say why
        return None, problems
    try:
        plan = msgspec.convert(dict(data) if isinstance(data, Mapping) else data, Plan)
    except msgspec.ValidationError:
        problems = [(json_path(path), message) for path, message in problems_in(data, Plan, (), _message)]
        return None, [f"{where}: {message}" for where, message in sorted(problems)]  # in path order, as listed
    return plan, record_problems(plan)


def _message(message: str, value: Any, kind: Any) -> str:
    """msgspec's ``message`` about ``value`` in a plan's words: a field that describes what it wants says so."""
    unknown = re.match(r"Object contains unknown field `([^`]*)`", message)
    struct = _bare(kind)
    if unknown and isinstance(struct, type) and issubclass(struct, msgspec.Struct):
        known = ", ".join(field.encode_name for field in msgspec.structs.fields(struct)) or "none"
        return f"{unknown[1]!r} was unexpected here (known: {known})"
    wanted = _description(kind)
    if wanted and ("matching regex" in message or message.startswith("Invalid enum") or _is_literal(kind)):
        return f"{shortened(repr(value))} is not {wanted}"
    return problem_message(message, value, _bare(kind))


def _bare(kind: Any) -> Any:
    """The one type ``kind`` stands for, without constraints, `UNSET` or null."""
    if get_origin(kind) is Annotated:
        return _bare(get_args(kind)[0])
    if get_origin(kind) in (Union, types.UnionType):
        members = [member for member in get_args(kind) if member not in (msgspec.UnsetType, type(None))]
        return _bare(members[0]) if len(members) == 1 else kind
    return kind


def _is_literal(kind: Any) -> bool:
    return get_origin(_bare(kind)) is Literal


def _description(kind: Any) -> str | None:
    """The description a field's type carries, looked for through optional and nullable unions."""
    if get_origin(kind) is Annotated:
        found = [meta.description for meta in get_args(kind)[1:] if getattr(meta, "description", None)]
        return found[-1] if found else _description(get_args(kind)[0])
    if get_origin(kind) in (Union, types.UnionType):
        return next(filter(None, map(_description, get_args(kind))), None)
    return None


def _read(path: Path) -> Any:
    """The JSON at ``path`` through the one bounded reader (regular files only), with a plan's fix."""
    try:
        return read_json(path, MAX_PLAN_BYTES)
    except ProfileError as error:  # the reader's sentence, with a plan's fix in place of a profile's
        what = str(error).rstrip(".").split("; ")[0]
        raise TuningError(f"{what}; {FIX}.") from None


def _check_header(data: Any, where: str) -> None:
    """`TuningError` unless ``data`` is an object of kind `PLAN_KIND` with ``schema_version`` the integer 1."""
    if not isinstance(data, Mapping) or data.get("kind") != PLAN_KIND:
        raise TuningError(f'{where} is not an aitune plan (no "kind": "{PLAN_KIND}"); {FIX}.')
    version = data.get("schema_version")
    if type(version) is not int or version != PLAN_SCHEMA_VERSION:  # neither true nor 1.0
        newer = type(version) is int and version > PLAN_SCHEMA_VERSION
        fix = "upgrade aitune" if newer else f"write the integer {PLAN_SCHEMA_VERSION}, or tune again"
        raise TuningError(
            f"{where} has plan schema_version {shortened(repr(version))}; this aitune reads version "
            f"{PLAN_SCHEMA_VERSION}: {fix}."
        )


# --- what a type cannot say, checked once on the typed record ---


def record_problems(plan: Plan) -> list[str]:
    """Distinct and disjoint paths, each graph's shapes against its structure and `MAX_EXAMPLE_ELEMENTS`,
    backends of tuned graphs only, of the plan's precision, with thread counts this machine has."""
    problems = _path_problems([region.path for region in plan.regions])
    for index, region in enumerate(plan.regions):
        problems += _region_problems(region, f"regions[{index}].wrapper", plan.precision)
    return problems


def _region_problems(region: Region, where: str, precision: str) -> list[str]:
    wrapper = region.wrapper
    problems = []
    for number, graph in enumerate(wrapper.graphs):
        problems += _graph_problems(graph, f"{where}.graphs[{number}]")
    known = {graph.graph_id for graph in wrapper.graphs}
    for graph_id, backend in wrapper.tuned_backends.items():
        if graph_id not in known:
            problems.append(f"{where}.tuned_backends.{graph_id}: no graph of that id in {where}.graphs")
        problems += _backend_problems(backend, f"{where}.tuned_backends.{graph_id}", precision)
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


def _graph_problems(graph: Graph, where: str) -> list[str]:
    """The graph's shapes (`_shape_problems`), then its structure against them (`_structure_problems`)."""
    return _shape_problems(graph, where) or _structure_problems(graph, where)


def _shape_problems(graph: Graph, where: str) -> list[str]:
    """One min and one max shape per input, of one length, min ≤ max, and the example built at the max
    shapes holding at most `MAX_EXAMPLE_ELEMENTS`: checked before anything is allocated."""
    low, high = graph.min_shapes, graph.max_shapes
    if len(low) != len(high):
        return [f"{where}.min_shapes: {len(low)} shapes, but max_shapes has {len(high)}"]
    elements = 0
    for index, (small, large) in enumerate(zip(low, high, strict=True)):
        if (small is None) != (large is None) or (small is not None and len(small) != len(large)):
            return [f"{where}.min_shapes[{index}]: {shortened(repr(small))} does not match max_shapes {large}"]
        if small is None or large is None:
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


def _structure_problems(graph: Graph, where: str) -> list[str]:
    """The structure parsed by `aitune.torch.graphs.graph_spec.check_graph` (never a loader that can
    import), its id and its leaves against the shapes; its sentence, when it refuses."""
    try:
        check_graph(msgspec.to_builtins(graph), where)
    except TuningError as error:
        return [str(error)]
    return []


def _backend_problems(backend: Backend, where: str, precision: str) -> list[str]:
    """A backend of the plan's precision (a reduced one is never applied where the plan says fp32); a thread
    count no larger than this machine's CPUs (the model already bounds it by `MAX_THREADS`)."""
    name = str(backend.__struct_config__.tag)
    level = getattr(BACKENDS.get(name), "precision", "fp32")
    if level != "fp32" and level != precision:
        return [
            f"{where}.name: {name} computes in {level}, but the plan's precision is {precision} "
            "(a reduced precision is applied only by a plan made at it, after the task gate)"
        ]
    threads = getattr(backend.config, "intra_op_threads", None)  # only ONNX Runtime's config has threads
    cpus = os.cpu_count() or 1
    if isinstance(threads, int) and threads > cpus:
        return [
            f"{where}.config.intra_op_threads: {threads} threads is more than this machine's {cpus} CPUs "
            "(threads beyond the cores oversubscribe them and run slower)"
        ]
    return []


# --- the plan rebuilt from what was checked ---


def normalised(plan: Plan) -> dict[str, Any]:
    """A checked plan rebuilt from the keys this version knows, in the order tune writes them.

    Unknown keys are dropped, so nothing a stranger added to a plan travels into the next one; a region's
    ``precision`` and ``backends`` are rebuilt from its wrapper, never the file's word for them.
    """
    rebuilt = msgspec.to_builtins(plan, enc_hook=str)  # a live plan's text may be a str subclass (TorchVersion)
    rebuilt["tolerance"] = {"rtol": rebuilt["tolerance"].get("rtol"), "atol": rebuilt["tolerance"].get("atol")}
    if rebuilt["task_gate"] is not None:
        rebuilt["task_gate"] = plan_task_gate(rebuilt["task_gate"])
    if not rebuilt.get("generation"):
        rebuilt.pop("generation", None)
    rebuilt["regions"] = [_normalised_region(region) for region in rebuilt["regions"]]
    return rebuilt


def _normalised_region(region: dict[str, Any]) -> dict[str, Any]:
    """A region whose ``backends`` are its wrapper's non-eager ones, as `make_plan` writes them."""
    backends = {key: value for key, value in region["wrapper"]["tuned_backends"].items() if value["name"] != "eager"}
    return {
        "path": region["path"],
        "mode": region["mode"],
        "module_type": region["module_type"],
        "precision": backends_precision(backends),
        "backends": backends,
        "speedup_vs_eager": region.get("speedup_vs_eager"),
        **({"held_memory": region["held_memory"]} if "held_memory" in region else {}),
        "wrapper": region["wrapper"],
    }


def backends_precision(backends: Mapping[str, Mapping[str, Any]]) -> str:
    """The level a region's ``backends`` (by graph id, as a plan holds them) compute at: the reduced one any of
    them runs, else fp32. A plan's region records it, and replaying the backends rebuilds it."""
    levels = {getattr(BACKENDS.get(backend["name"]), "precision", "fp32") for backend in backends.values()}
    return next((level for level in sorted(levels) if level != "fp32"), "fp32")


def plan_task_gate(gate: Mapping[str, Any]) -> dict[str, Any]:
    """The task gate's figure as a plan keeps it: the verdict's known keys (its regions are the plan's paths)."""
    return {key: gate.get(key) for key in TASK_GATE_KEYS}
