"""Applying a plan: its tuned wrappers put into a freshly built model by path, all or nothing.

Applying builds only the chosen backends, each behind the same correctness gate on synthetic inputs
of the recorded shapes; a graph whose backend fails there runs eager. The plan is read and checked
first (`aitune.torch.tuning.plan_check`); what it needs of the model (a module of the type it was
made on at each path, the precision available here, a task gate verdict that admits its reduced
regions) is checked before anything is changed.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from aitune.compare.quality import TaskJudgment
from aitune.errors import TuningError
from aitune.torch.decoder_recipe import swap_generation
from aitune.torch.performance.environment import environment
from aitune.torch.performance.regions import qualified_type
from aitune.torch.precision import precision_unavailable
from aitune.torch.tuning.paths import module_at, replace_modules
from aitune.torch.tuning.plan_check import load_plan
from aitune.torch.tuning.wrapper import Module, check_restorable

ENVIRONMENT_KEYS = ("torch", "cuda", "devices", "machine")
"""The environment facts a tuned backend depends on; a plan applied where one differs gets a warning."""


@dataclass(frozen=True)
class AppliedPlan:
    """The wrappers a plan put in place, by path, and the environment differences it warned about."""

    wrappers: dict[str, Module]
    environment_differences: list[str]
    generation_before: dict[str, Any] | None = None  # the generate settings the plan's replaced, to set back


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
