"""What the loop writes down from what stayed tuned: the plan (verified wins only) and tuning.json's report."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aitune.torch.loop.record import Tuning
from aitune.torch.performance.environment import environment
from aitune.torch.performance.regions import qualified_type
from aitune.torch.tuning.correctness import Tolerance
from aitune.torch.tuning.plan_write import make_plan, replayed_plan
from aitune.torch.tuning.precision_choice import PrecisionChoice
from aitune.torch.tuning.report import tuning_report, weight_memory


def plan_of(
    obj: Any,
    tuning: Tuning,
    checked: Mapping[str, Any] | None,
    tolerance: Tolerance,
    precision: str,
    memory: dict[str, Any] | None,
    ranks: dict[str, Any] | None,
) -> dict[str, Any]:
    """The plan of what stayed tuned after the end-to-end check (a plan holds verified wins only): a new one, or
    the ``checked`` plan that was applied, replayed."""
    judgment = tuning.judgment
    if checked is None:
        return make_plan(
            qualified_type(obj), tuning.tuned, tolerance.to_dict(), precision=precision, task_gate=judgment,
            process_memory=memory, generation=tuning.generation if tuning.tuned else None, distributed=ranks,
        )  # fmt: skip
    return replayed_plan(
        qualified_type(obj), tuning.tuned, checked, task_gate=judgment, process_memory=memory, distributed=ranks
    )


def report_of(
    tuning: Tuning,
    precision: str,
    choices: list[PrecisionChoice],
    memory: dict[str, Any] | None,
    ranks: dict[str, Any] | None,
) -> dict[str, Any] | None:
    """tuning.json's report of every trial, with the verification, the precision and the memory; None when a plan
    was applied (nothing was tried)."""
    if tuning.results is None:
        return None
    verification, judgment = tuning.verification, tuning.judgment
    return tuning_report(
        tuple(outcome for trials in tuning.results.values() for outcome in trials),
        environment(),
        {
            **({"verification": verification.to_dict()} if verification is not None else {}),
            "precision": precision,
            "precision_choices": [choice.to_dict() for choice in choices],
            "task_gate": judgment.to_dict() if judgment is not None else None,
            "weight_memory": weight_memory(tuning.tuned),
            # resident bytes before and after tuning, measured
            **({"process_memory": memory} if memory is not None else {}),
            **({"ranks": ranks} if ranks is not None else {}),
            # the decoder recipe's settings: eager with them ÷ eager without, timed before tuning
            **({"generation_cost": tuning.generation_cost} if tuning.generation_cost is not None else {}),
        },
    )
