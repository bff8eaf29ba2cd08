"""Training mode is seen: a classifier whose ``.eval()`` was forgotten (the zoo's ``forgotten_eval``) is captured
with a ``TRAINING_MODE`` warning naming its BatchNorm and Dropout modules, its buffers are bitwise as they were
after the capture and after ``tune``, and ``tune`` (command and loop API) refuses it naming ``.eval()``."""

from __future__ import annotations

import pytest
import sequential_app
import torch
from cli_helpers import APPS, run_cli
from torch import nn

import aitune.torch
from aitune.errors import TuningError
from aitune.torch import LoopConfig, optimize
from aitune.torch.model_state import KeptState

FAST = {"warmup_runs": 1, "measured_runs": 2, "record_calls": 1}


def state_of(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: tensor.clone() for name, tensor in model.state_dict().items()}


def bitwise_equal(one: dict[str, torch.Tensor], other: dict[str, torch.Tensor]) -> bool:
    return one.keys() == other.keys() and all(torch.equal(one[name], other[name]) for name in one)


def training_warnings(doc) -> list[str]:
    return [found["message"] for found in doc["warnings"] if found["code"] == "TRAINING_MODE"]


def test_a_capture_of_a_model_left_in_training_mode_warns_naming_its_batchnorms_and_dropout_and_keeps_its_buffers():
    model, images, classify = sequential_app.forgotten_eval.build()
    found = state_of(model)

    doc = aitune.torch.profile(model, images, classify, warmup_runs=1, measured_runs=2).data

    (message,) = training_warnings(doc)
    assert "features.1: num_batches_tracked, running_mean, running_var" in message
    assert "features.4: num_batches_tracked, running_mean, running_var" in message
    assert "head.0 draws a random mask" in message and ".eval()" in message
    assert bitwise_equal(state_of(model), found)


def test_the_same_model_in_eval_mode_is_captured_without_the_warning():
    model, images, classify = sequential_app.forgotten_eval.build()
    model.eval()

    doc = aitune.torch.profile(model, images, classify, warmup_runs=1, measured_runs=2).data

    assert training_warnings(doc) == []


def test_buffers_are_put_back_also_when_the_workload_raises():
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    found = state_of(model)

    with pytest.raises(RuntimeError, match="the workload failed"), KeptState([("", model)]) as kept:
        model(torch.randn(8, 4))
        raise RuntimeError("the workload failed")

    assert bitwise_equal(state_of(model), found)
    assert {path: sorted(names) for path, names in kept.changed.items()} == {
        "1": ["num_batches_tracked", "running_mean", "running_var"]
    }


def test_a_dropout_of_probability_zero_or_in_eval_mode_draws_nothing():
    model = nn.Sequential(nn.Dropout(0.0), nn.Dropout(0.1).eval(), nn.Dropout(0.1))

    with KeptState([("", model)]) as kept:
        pass

    assert kept.random == ["2"]


@pytest.mark.slow
def test_optimize_refuses_a_model_in_training_mode_naming_eval_and_leaves_its_buffers_as_found():
    model, images, classify = sequential_app.forgotten_eval.build()
    found = state_of(model)

    with pytest.raises(TuningError, match=r"^the model is in training mode: .*call \.eval\(\)"):
        optimize(model, images, classify, config=LoopConfig(**FAST))

    assert bitwise_equal(state_of(model), found)
    assert not any(type(module).__name__ == "Module" for module in model.modules())


@pytest.mark.slow
def test_tune_refuses_a_model_in_training_mode_in_one_sentence_with_exit_code_2(tmp_path):
    target = f"{APPS / 'sequential_app.py'}:infer_training"

    result = run_cli("tune", target, "--input", "x", "--obj", "training", "--warmup", "1", "--runs", "2",
                     "--out", str(tmp_path / "tuned"))  # fmt: skip

    assert result.returncode == 2
    assert "the model is in training mode" in result.stderr and "call .eval() on the model" in result.stderr
    assert "features.1" in result.stderr and "head.0" in result.stderr and "Traceback" not in result.stderr
