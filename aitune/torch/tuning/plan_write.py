"""Writing a plan: what a tuning run chose, per region, so a freshly built model gets it without searching again.

A plan lists each tuned region's path (from the discovery root, as ``aitune.torch.wrap`` takes it),
the module type it was tuned on, the winning backend of each recorded graph with its configuration,
the tolerance of the gate, the measured speedup and the environment it was made in
(`aitune.torch.tuning.plan_model` defines it). A plan written after applying one is made from the
wrappers put in place, never copied from the file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from torch import nn

import aitune
from aitune.compare.quality import TaskJudgment
from aitune.torch.performance.environment import environment
from aitune.torch.performance.regions import qualified_type
from aitune.torch.tuning.outcome import RegionOutcome
from aitune.torch.tuning.plan_check import backends_precision, plan_task_gate
from aitune.torch.tuning.plan_model import PLAN_KIND, PLAN_SCHEMA_VERSION


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
        "task_gate": plan_task_gate(task_gate.to_dict()) if task_gate is not None else None,
        **({"generation": dict(generation)} if generation else {}),
        # The gain model's calibration belongs to profiles (suggest reads it there), not to a plan.
        "environment": environment(),
        **({"process_memory": dict(process_memory)} if process_memory else {}),
        **({"distributed": dict(distributed)} if distributed else {}),
        "regions": regions,
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
