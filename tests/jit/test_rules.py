"""Exclusions keep modules from being patched; skip lists, depth and parameter limits keep them from tuning."""

from __future__ import annotations

import pytest
import torch

from aitune.errors import TuningError
from aitune.torch import jit

from .conftest import Block, Net, built_net, config, states


def test_excluded_packages_and_classes_are_never_patched():
    with jit.intercept(config(exclude_packages=("torch.nn.",), exclude_classes=("Block",))):
        net = Net()

    assert [name for name, module in net.named_modules() if "forward" in vars(module)] == [""]


def test_containers_are_never_patched():
    with jit.intercept(config()):
        net = Net()

    assert "forward" not in vars(net.blocks)


def test_a_module_in_the_skip_list_runs_its_own_forward_and_its_children_still_tune():
    net = built_net(skip=("Net",))

    net(torch.randn(3, 8))
    net(torch.randn(3, 8))

    found = states(net)
    assert found["Net"] == "skipped"
    assert (found["Net.blocks.0"], found["Net.blocks.1"], found["Net.head"]) == ("tuned", "tuned", "tuned")
    assert jit.active_session().find(net).reason == "in the skip list"


def test_a_skip_list_entry_can_be_a_fully_qualified_name():
    net = built_net(skip=("Net", "Net.blocks.1"))

    net(torch.randn(3, 8))
    net(torch.randn(3, 8))

    found = states(net)
    assert (found["Net.blocks.0"], found["Net.blocks.1"]) == ("tuned", "skipped")
    assert found["Net.blocks.1.inner"] == "tuned"


def test_modules_deeper_than_max_depth_never_tune():
    net = built_net(skip=("Net", "Block"), max_depth=1)

    net(torch.randn(3, 8))
    net(torch.randn(3, 8))

    found = states(net)
    assert found["Net.head"] == "tuned"
    assert found["Net.blocks.0.inner"] == "skipped"
    assert jit.active_session().find(net.blocks[0].inner).reason == "depth 2 is beyond max_depth 1"


def test_modules_with_fewer_parameters_than_min_parameters_never_tune():
    net = built_net(skip=("Net",), min_parameters=100)

    net(torch.randn(3, 8))
    net(torch.randn(3, 8))

    found = states(net)
    assert (found["Net.blocks.0"], found["Net.head"]) == ("tuned", "skipped")
    assert jit.active_session().find(net.head).reason == "18 parameters, fewer than min_parameters 100"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"mode": "lazy"}, "JIT mode must be one of eager, deferred"),
        ({"tune_after": 0}, "tune_after must be at least 1"),
        ({"dry_run_failure_probability": 1.5}, r"dry_run_failure_probability must be in \[0, 1\]"),
        ({"max_depth": -1}, "max_depth must be 0 or more"),
    ],
)
def test_a_bad_setting_is_named_in_one_sentence(options, message):
    with pytest.raises(TuningError, match=message):
        jit.JitConfig(**options)


def test_a_module_built_outside_interception_is_not_patched():
    with jit.intercept(config()):
        pass

    block = Block()

    assert "forward" not in vars(block)
