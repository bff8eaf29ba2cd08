"""What tuning costs in memory: a tuned backend's own copy of what it needs, measured beside the original module."""

from __future__ import annotations

import copy

import loop_app
import pytest
import torch
from torch import nn

import aitune.torch as ait
from aitune.errors import TuningError
from aitune.torch.backends import BuildContext
from aitune.torch.backends.held_memory import process_memory, process_rss_bytes
from aitune.torch.graphs.graph_spec import Sample
from aitune.torch.tuning.paths import unwrap
from aitune.torch.tuning.plan_check import load_plan, plan_problems
from aitune.torch.tuning.plan_write import make_plan
from tuning.conftest import onnxruntime_encoder


def test_an_onnxruntime_session_holds_its_own_copy_of_the_weights_within_ten_percent():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 1024)).eval()
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())  # 16.8 MB of float32
    sample = Sample((torch.randn(2, 1024),), {})
    with torch.no_grad():
        context = BuildContext(model, model.forward, [sample], [model(*sample.args)], torch.device("cpu"))

    built = ait.OnnxRuntimeBackend(intra_op_threads=1).build(context)

    assert built.held.host_bytes == pytest.approx(weight_bytes, rel=0.10)
    assert built.held.device_bytes is None  # no GPU: not measured, never 0


def test_the_process_memory_is_what_tuning_left_and_never_below_zero():
    assert process_memory(100, 250) == {
        "rss_before_bytes": 100,
        "rss_after_bytes": 250,
        "held_bytes": 150,
        "measured_by": "process_rss",
    }
    assert process_memory(250, 100)["held_bytes"] == 0
    assert process_memory(None, 100) is None
    assert process_rss_bytes() > 0


@pytest.fixture(scope="module")
def plan():
    pipe = loop_app.build()
    try:
        region = onnxruntime_encoder(pipe)
        memory = process_memory(1_000_000, 3_000_000)
        plan = make_plan("loop_app.Pipeline", [region], {"rtol": None, "atol": None}, process_memory=memory)
        return plan, region.report
    finally:
        unwrap(pipe, ["encoder"])


def test_the_plan_records_each_tuned_regions_held_memory_and_the_process(plan):
    made, outcome = plan
    winner = next(c for g in outcome.graphs for c in g.candidates if c.won)

    region = made["regions"][0]
    assert region["held_memory"] == outcome.held_memory
    assert region["held_memory"]["host_bytes"] == winner.held_memory["host_bytes"] >= 0
    assert made["process_memory"]["held_bytes"] == 2_000_000
    assert plan_problems(made) == []
    assert load_plan(made) == made  # kept by the normalised reader


@pytest.mark.parametrize(
    ("where", "value"),
    [("held_memory", {"host_bytes": -1}), ("held_memory", {"host_bytes": "16 MB"}), ("held_memory", {"x": 1})],
)
def test_a_plan_with_a_malformed_held_memory_is_refused(plan, where, value):
    hostile = copy.deepcopy(plan[0])
    hostile["regions"][0][where] = value

    with pytest.raises(TuningError, match="held_memory"):
        load_plan(hostile)


def test_a_plan_with_an_absurd_process_memory_is_refused(plan):
    hostile = copy.deepcopy(plan[0])
    hostile["process_memory"]["rss_after_bytes"] = 2**70

    with pytest.raises(TuningError, match="process_memory"):
        load_plan(hostile)
