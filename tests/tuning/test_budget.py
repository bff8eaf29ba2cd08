"""One time budget on a fake clock: shares by expected value, backends by gain per second, and why the rest waited."""

from __future__ import annotations

from typing import Any

import pytest

import aitune.torch as ait
from aitune.torch.backends import Backend, BuildContext, Built
from aitune.torch.tuning.budget import TimeBudget

from .conftest import FAST_MEASURE
from .test_gate_and_strategies import tune_with


class FakeClock:
    """Seconds that pass only when a test (or a backend's build) says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class SlowBuild(Backend):
    """The original forward, after a build that takes ``seconds`` on the fake clock; named as a real backend
    so the budget's priors apply."""

    def __init__(self, name: str, seconds: float, clock: FakeClock) -> None:
        self.name, self.seconds, self.clock = name, seconds, clock  # type: ignore[misc]

    def build(self, context: BuildContext) -> Built:
        self.clock.advance(self.seconds)
        return Built(run=context.forward)

    def config(self) -> dict[str, Any]:
        return {}


def test_backends_go_by_expected_gain_per_second_and_measured_costs_replace_the_priors():
    budget = TimeBudget(100, clock=FakeClock())
    names = ["inductor", "tensorrt", "onnxruntime"]

    before = budget.order(names, str)
    budget.record("inductor", 1.0)  # Inductor built in a second here: now the best value
    after = budget.order(names, str)

    assert before == ["onnxruntime", "inductor", "tensorrt"]
    assert after == ["inductor", "onnxruntime", "tensorrt"]


def test_regions_share_what_is_left_by_expected_value_and_pass_on_what_they_leave():
    clock = FakeClock()
    budget = TimeBudget(100, clock=clock)
    budget.expect({"unet": 0.3, "vae": 0.1})

    unet_share = budget.region_left("unet")
    clock.advance(40)  # unet used 40 of its 75 s
    vae_share = budget.region_left("vae")

    assert unet_share == pytest.approx(75.0)
    assert vae_share == pytest.approx(60.0)  # all that is left: no region waits after it


def test_time_spent_before_tuning_is_kept_back_for_what_follows():
    clock = FakeClock()
    budget = TimeBudget(100, clock=clock, reserve_factor=2.0)
    clock.advance(10)  # the before capture

    left = budget.left()

    assert (budget.reserved_s, left) == (20.0, 70.0)


def test_verification_stops_one_capture_before_the_budget_ends():
    clock = FakeClock()
    budget = TimeBudget(100, clock=clock, reserve_factor=2.0)
    assert budget.verification_deadline() is None  # nothing kept back yet: no trial has started
    clock.advance(10)  # the before capture
    budget.left()  # the first trial keeps back 20 s: the after capture and verification, 10 s each

    assert budget.verification_deadline() == 90.0


def test_the_cheaper_backend_is_tried_first_and_one_that_would_not_fit_says_why(wrapped):
    clock = FakeClock()
    backends = [SlowBuild("inductor", 21.0, clock), SlowBuild("onnxruntime", 3.0, clock)]
    strategy = ait.MinLatencyStrategy(backends, budget=TimeBudget(10, clock=clock), measure=FAST_MEASURE)

    _, graph, _, _ = tune_with(wrapped, strategy)

    onnx, inductor = graph["candidates"]
    assert (onnx["backend"], onnx["status"]) == ("onnxruntime", "rejected")  # tried; as fast as eager, so it lost
    assert (inductor["backend"], inductor["status"]) == ("inductor", "skipped")
    assert inductor["reason"] == (
        "not tried: inductor is expected to take 20.0 s, more than the 7.0 s left of this region's share "
        "of the 10 s time budget"
    )
    assert graph["strategy"]["budget"]["measured_try_s"] == {"onnxruntime": [3.0]}


def test_once_the_budget_is_spent_every_remaining_backend_says_so(wrapped):
    clock = FakeClock()
    budget = TimeBudget(10, clock=clock, reserve_factor=1.0)
    clock.advance(6)  # 6 s before tuning, 6 s kept back: nothing left
    backends = [SlowBuild("onnxruntime", 1.0, clock), ait.EagerBackend()]

    _, graph, _, _ = tune_with(wrapped, ait.MinLatencyStrategy(backends, budget=budget, measure=FAST_MEASURE))

    assert graph["winner"] == "eager"
    assert [c["status"] for c in graph["candidates"]] == ["skipped", "skipped"]
    assert {c["reason"] for c in graph["candidates"]} == {
        "not tried: the time budget of 10 s is spent (6.0 s used, 6.0 s kept for the after capture and verification)"
    }


def test_a_strategy_hands_suggests_expected_values_to_its_budget():
    budget = TimeBudget(100, clock=FakeClock())
    strategy = ait.MinLatencyStrategy([], budget=budget)

    strategy.expect({"unet": 0.3, "vae": 0.1})

    assert budget.region_left("unet") == pytest.approx(75.0)
