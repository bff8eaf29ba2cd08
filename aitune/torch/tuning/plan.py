"""The tuning plan: what a tuning run chose, per region, so a freshly built model gets it without searching again.

A plan lists each tuned region's path (from the discovery root, as ``aitune.torch.wrap`` takes it),
the module type it was tuned on, the winning backend of each recorded graph with its configuration,
the tolerance of the gate, the measured speedup and the environment it was made in. Applying it
builds only the chosen backends, each behind the same correctness gate on synthetic inputs of the
recorded shapes; a graph whose backend fails there runs eager.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson
import torch
from torch import nn

import aitune
from aitune.errors import TuningError
from aitune.torch.module.paths import module_at, replace_modules
from aitune.torch.module.wrapper import Module, check_restorable
from aitune.torch.performance.environment import environment
from aitune.torch.performance.regions import qualified_type

PLAN_KIND = "aitune-plan"
PLAN_SCHEMA_VERSION = 1
ENVIRONMENT_KEYS = ("torch", "cuda", "devices", "machine")
"""The environment facts a tuned backend depends on; a plan applied where one differs gets a warning."""


@dataclass(frozen=True)
class TunedRegion:
    """One region a loop tuned: its path, how (``aot`` or ``jit``), the module and its saved graphs and backends."""

    path: str
    mode: str
    module: nn.Module
    saved: dict[str, Any]  # the `Module.to_dict` form
    report: Mapping[str, Any] | None  # its tuning report entry

    @property
    def backends(self) -> dict[str, Any]:
        """The non-eager backend of each graph, by graph id."""
        return {graph: backend for graph, backend in self.saved["tuned_backends"].items() if backend["name"] != "eager"}


@dataclass(frozen=True)
class AppliedPlan:
    """The wrappers a plan put in place, by path, and the environment differences it warned about."""

    wrappers: dict[str, Module]
    environment_differences: list[str]


def make_plan(target_type: str, tuned: Sequence[TunedRegion], tolerance: Mapping[str, Any]) -> dict[str, Any]:
    """The plan of the ``tuned`` regions; a region whose every graph kept eager is left out."""
    regions = [
        {
            "path": region.path,
            "mode": region.mode,
            "module_type": qualified_type(region.module),
            "backends": region.backends,
            "speedup_vs_eager": _best_speedup(region.report or {}),
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
        "tolerance": dict(tolerance),
        "environment": environment(),
        "regions": regions,
    }


def load_plan(plan: str | Path | Mapping[str, Any]) -> Mapping[str, Any]:
    """A plan given as a path or as the loaded dict, checked to be one; `TuningError` naming what is wrong."""
    if isinstance(plan, Mapping):
        data: Any = plan
        where = "the plan"
    else:
        where = str(plan)
        try:
            data = orjson.loads(Path(plan).read_bytes())
        except OSError as error:
            raise TuningError(
                f"cannot read the plan {where} ({error.strerror}); pass the plan.json tune wrote."
            ) from None
        except orjson.JSONDecodeError as error:
            raise TuningError(f"{where} is not valid JSON ({error}); pass the plan.json tune wrote.") from None
    if not isinstance(data, Mapping) or data.get("kind") != PLAN_KIND:
        raise TuningError(f'{where} is not an aitune plan (no "kind": "{PLAN_KIND}"); pass the plan.json tune wrote.')
    if data.get("schema_version") != PLAN_SCHEMA_VERSION:
        raise TuningError(
            f"{where} has plan schema_version {data.get('schema_version')!r}; this aitune reads version "
            f"{PLAN_SCHEMA_VERSION}: tune again to make a new plan."
        )
    if not isinstance(data.get("regions"), list):
        raise TuningError(f"{where} has no list of regions; pass the plan.json tune wrote.")
    return data


def apply_plan(
    obj: Any, plan: str | Path | Mapping[str, Any], *, device: torch.device | str | None = None
) -> AppliedPlan:
    """Put the plan's tuned wrappers into ``obj`` by path, building only each region's chosen backends.

    Every region comes back as an ``aitune.torch.Module`` (``aot_module:<path>`` in profiles), also one
    the loop tuned in JIT mode: the plan holds its graphs and backends, so nothing is left to discover.

    Refuses, before anything is changed, when a path is missing under ``obj`` or holds a module of
    another type than the plan was made on; warns (``UserWarning``) when the environment differs
    (torch version, CUDA, devices, machine). All or nothing: if a wrapper fails, the ones already
    put in place are removed again.

    Example::

        pipe = build_pipeline()
        aitune.torch.apply_plan(pipe, "aitune_tuned/plan.json")
        pipe(prompt)  # runs the backends the plan chose
    """
    data = load_plan(plan)
    entries = {entry["path"]: entry for entry in data["regions"]}
    for path, entry in entries.items():
        _check_matches(obj, path, entry)
    differences = environment_differences(data.get("environment", {}), environment())
    if differences:
        warnings.warn(
            f"this plan was made with {'; '.join(differences)}: its backends are rebuilt and gated here, "
            "but their speedups may differ; tune again for figures of this environment.",
            UserWarning,
            stacklevel=2,
        )
    wrappers = replace_modules(
        obj, list(entries), lambda path, module: Module.from_dict(module, entries[path]["wrapper"], device=device)
    )
    return AppliedPlan(wrappers=wrappers, environment_differences=differences)


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
    if not Module.is_state_dict_valid(entry.get("wrapper")):
        raise TuningError(f"the plan's entry for '{path}' has no saved wrapper; tune again to make a new plan.")
    check_restorable(entry["wrapper"], path)  # every region is checked before any is applied


def _best_speedup(module: Mapping[str, Any]) -> float | None:
    """The winning candidate's speedup over eager of the module's most sampled graph."""
    graphs: Sequence[Mapping[str, Any]] = module.get("graphs", ())
    won = [graph for graph in graphs if graph.get("winner") not in (None, "eager")]
    if not won:
        return None
    graph = max(won, key=lambda graph: graph.get("samples", 0))
    return next(
        (c.get("speedup_vs_eager") for c in graph.get("candidates", ()) if c.get("backend") == graph["winner"]), None
    )
