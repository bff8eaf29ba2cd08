"""JIT tuning with real backends: outputs stay within the correctness gate's tolerance after tuning."""

from __future__ import annotations

import pytest
import torch
from tuning.conftest import FAST_MEASURE

import aitune.torch as ait
from aitune.torch.tuning.correctness import Tolerance, check_outputs

from .conftest import Net, built_net, states


def tuned_outputs(strategy: ait.TuneStrategy) -> tuple[Net, list[torch.Tensor], list[torch.Tensor]]:
    net = built_net(strategy=strategy)
    inputs = [torch.randn(3, 8), torch.randn(5, 8)]
    with torch.no_grad():
        expected = [net(x) for x in inputs]  # recording: the original forward
        actual = [net(x) for x in inputs]  # tuned from the second call on
    return net, expected, actual


def test_onnxruntime_tunes_the_topmost_module_and_its_outputs_pass_the_gate():
    net, expected, actual = tuned_outputs(ait.OneBackendStrategy(ait.OnnxRuntimeBackend(), measure=FAST_MEASURE))

    assert states(net)["Net"] == "tuned"
    assert check_outputs(expected, actual, Tolerance()).passed


@pytest.mark.slow
def test_inductor_tunes_the_topmost_module_and_its_outputs_pass_the_gate():
    net, expected, actual = tuned_outputs(ait.OneBackendStrategy(ait.InductorBackend(), measure=FAST_MEASURE))

    assert states(net)["Net"] == "tuned"
    assert check_outputs(expected, actual, Tolerance()).passed
