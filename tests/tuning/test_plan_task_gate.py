"""`apply_plan` holds a reduced-precision plan to its task gate's verdict, as `tune --plan` does: without the
workload it cannot judge the task itself, so a verdict that is missing, failed, of another precision, or that
never judged a region refuses the plan before anything in the model changes."""

from __future__ import annotations

import copy

import classifier_app
import pytest
import torch

from aitune.errors import TuningError
from aitune.torch import LoopConfig, optimize
from aitune.torch.tuning.paths import unwrap
from aitune.torch.tuning.plan_apply import apply_plan
from aitune.torch.tuning.strategies import named_strategy
from aitune.torch.tuning.wrapper import Module

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def int8_plan() -> dict:
    """The plan the loop writes for a classifier whose int8 build keeps every decision (the gate passed)."""
    strategy = named_strategy("first-wins", ["int8_dynamic"], precision="int8")
    config = LoopConfig(
        targets=("body",), strategy=strategy, precision="int8", warmup_runs=1, measured_runs=2, record_calls=1,
        verification=None,
    )  # fmt: skip
    result = optimize(classifier_app.well_apart(), classifier_app.x, config=config)
    result.restore()
    assert result.plan["task_gate"]["passed"] is True and [r["path"] for r in result.plan["regions"]] == ["body"]
    return result.plan


def edited(plan: dict, change) -> dict:
    copied = copy.deepcopy(plan)
    change(copied)
    return copied


REFUSALS = {
    "no verdict": (lambda plan: plan.update(task_gate=None), "holds no verdict"),
    "marked failed": (lambda plan: plan["task_gate"].update(passed=False), "did not pass (top1_agreement 1.0"),
    "a failing figure": (
        lambda plan: plan["task_gate"].update(value=0.5),
        "did not pass (top1_agreement 0.5 against a bar of 0.99)",
    ),
    "another precision": (
        lambda plan: plan["task_gate"].update(precision="bf16"),
        "judged precision bf16, not the plan's int8",
    ),
    "other regions": (lambda plan: plan["task_gate"].update(regions=["head"]), "never judged region 'body'"),
    "no inputs": (
        lambda plan: plan["task_gate"].update(inputs=0),
        "is not a whole verdict (a precision, metric, bar, figure, regions and inputs)",
    ),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_a_plan_whose_task_gate_does_not_admit_its_int8_regions_is_refused_and_nothing_changes(int8_plan, case):
    change, problem = REFUSALS[case]
    model = classifier_app.well_apart()
    before = model(classifier_app.x)

    with pytest.raises(TuningError) as refused:
        apply_plan(model, edited(int8_plan, change))

    assert str(refused.value).startswith(f"the plan's task gate {problem}")
    assert str(refused.value).endswith(
        "so its int8 regions are not applied; run `aitune-profile tune --plan PLAN` to judge them on your workload,"
        " or tune again."
    )
    assert not isinstance(model.body, Module) and "forward" not in vars(model.body)
    assert torch.equal(model(classifier_app.x), before)


def test_the_plan_as_the_loop_wrote_it_is_applied(int8_plan):
    model = classifier_app.well_apart()

    applied = apply_plan(model, int8_plan)
    try:
        backends = list(applied.wrappers["body"].to_dict()["tuned_backends"].values())
    finally:
        unwrap(model, list(applied.wrappers))

    assert backends == [{"name": "int8_dynamic", "config": {}}]
