"""A patched module moves init → recording → tuned (or eager when tuning fails) and is detached at the end."""

from __future__ import annotations

import inspect

import pytest
import torch
from torch import nn
from tuning.conftest import FAST_MEASURE

import aitune.torch as ait
from aitune.errors import TuningError
from aitune.torch import jit
from aitune.torch.registry import MODULE_REGISTRY

from .conftest import Block, FailsFor, Net, built_net, config, states


def test_a_module_built_under_interception_is_patched_in_init_and_keeps_its_outputs_and_signature():
    with jit.intercept(config()):
        block = Block().eval()
    plain = Block().eval()  # built after the block: not intercepted
    plain.load_state_dict(block.state_dict())
    x = torch.randn(3, 8)

    patched = jit.active_session().find(block)

    assert patched.state is jit.JitState.INIT
    assert "forward" in vars(block) and "forward" not in vars(plain)
    assert inspect.signature(block.forward) == inspect.signature(plain.forward)
    assert list(inspect.signature(block.forward).parameters) == ["x", "scale"]
    assert torch.equal(block(x), plain(x))


def test_the_first_call_places_every_module_under_a_unique_fully_qualified_name_and_starts_recording():
    net = built_net()

    net(torch.randn(3, 8))

    assert states(net) == {
        "Net": "recording",
        "Net.blocks.0": "recording",
        "Net.blocks.0.inner": "recording",
        "Net.blocks.0.outer": "recording",
        "Net.blocks.1": "recording",
        "Net.blocks.1.inner": "recording",
        "Net.blocks.1.outer": "recording",
        "Net.head": "recording",
    }
    assert "jit_module:Net.blocks.1.inner" in MODULE_REGISTRY


def test_two_topmost_modules_of_one_class_get_distinct_names():
    with jit.intercept(config()):
        first, second = nn.Linear(2, 2), nn.Linear(2, 2)

    first(torch.randn(1, 2))
    second(torch.randn(1, 2))

    session = jit.active_session()
    assert [session.find(first).fq_name, session.find(second).fq_name] == ["Linear", "Linear_1"]


def test_after_tune_after_calls_the_topmost_module_tunes_and_its_descendants_are_detached():
    net = built_net()
    x = torch.randn(3, 8)
    expected = net(x)

    tuned_output = net(x)

    assert states(net)["Net"] == "tuned"
    assert set(states(net).values()) == {"tuned", "detached"}
    assert jit.active_session().find(net.head).absorbed_by is jit.active_session().find(net)
    assert torch.allclose(tuned_output, expected)
    assert [entry.region for entry in MODULE_REGISTRY] == ["jit_module:Net"]


def test_tune_after_one_tunes_on_the_first_call():
    net = built_net(tune_after=1)

    net(torch.randn(3, 8))

    assert states(net)["Net"] == "tuned"


def test_a_parent_that_fails_to_tune_runs_eager_and_its_children_tune_instead():
    strategy = ait.OneBackendStrategy(FailsFor(Net), measure=FAST_MEASURE)
    net = built_net(strategy=strategy)
    x = torch.randn(3, 8)
    expected = net(x)

    net(x)

    found = states(net)
    assert found["Net"] == "eager"
    assert (found["Net.blocks.0"], found["Net.blocks.1"], found["Net.head"]) == ("tuned", "tuned", "tuned")
    assert found["Net.blocks.0.inner"] == "detached"
    assert "outside tolerance" in jit.active_session().find(net).reason
    assert torch.allclose(net(x), expected)


def test_an_eager_parent_falls_back_level_by_level_down_to_the_leaves():
    strategy = ait.OneBackendStrategy(FailsFor(Net, Block), measure=FAST_MEASURE)
    net = built_net(strategy=strategy)

    net(torch.randn(3, 8))
    net(torch.randn(3, 8))

    found = states(net)
    assert (found["Net"], found["Net.blocks.0"], found["Net.head"]) == ("eager", "eager", "tuned")
    assert found["Net.blocks.0.inner"] == found["Net.blocks.1.outer"] == "tuned"


def test_a_module_waits_while_an_ancestor_is_still_recording():
    net = built_net(tune_after=3)

    net(torch.randn(3, 8))  # each block runs once per call, like the net: nobody reaches 3 calls first
    net(torch.randn(3, 8))

    assert set(states(net).values()) == {"recording"}


def test_disabling_detaches_every_module_and_restores_its_own_forward():
    net = built_net()
    net(torch.randn(3, 8))
    patched = jit.active_session().find(net)

    jit.disable()

    assert patched.state is jit.JitState.DETACHED
    assert all("forward" not in vars(module) for module in net.modules())
    assert jit.active_session() is None and len(MODULE_REGISTRY) == 0


def test_tuning_a_module_that_has_not_recorded_names_the_fix():
    net = built_net()

    with pytest.raises(TuningError, match="module 'Net' is init with no recorded calls to tune from; run it"):
        jit.active_session().find(net).tune()
