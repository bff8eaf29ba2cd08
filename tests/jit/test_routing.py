"""The router: cached forwards follow the state, user hooks fire once, backend hooks run first, copies are plain."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import torch
from torch import nn
from tuning.conftest import FAST_MEASURE

import aitune.torch as ait
from aitune.torch import jit
from aitune.torch.backends import Backend, BuildContext, Built

from .conftest import Block, CountingBackend, built_net, config


def counting_net():
    backend = CountingBackend()
    return built_net(strategy=ait.OneBackendStrategy(backend, measure=FAST_MEASURE)), backend


def test_a_forward_cached_before_tuning_runs_the_tuned_backend_after_it():
    net, backend = counting_net()
    cached = net.forward
    x = torch.randn(3, 8)
    cached(x)
    cached(x)  # the second recorded call tunes
    served = backend.calls

    cached(x)

    assert jit.active_session().find(net).state is jit.JitState.TUNED
    assert backend.calls == served + 1


def test_a_forward_cached_before_reset_runs_the_original_after_it():
    net, backend = counting_net()
    cached = net.forward
    x = torch.randn(3, 8)
    net(x)
    expected = net(x)
    served = backend.calls

    jit.reset()

    assert torch.allclose(cached(x), expected)
    assert backend.calls == served
    assert "forward" not in vars(net)


def test_user_hooks_fire_once_per_call_in_every_state():
    net = built_net()
    fired: list[str] = []
    net.register_forward_pre_hook(lambda module, args: fired.append("pre"))
    net.register_forward_hook(lambda module, args, output: fired.append("post"))
    x = torch.randn(3, 8)

    for _ in range(3):  # recording, recording + tuning, tuned
        net(x)
    jit.reset()
    net(x)  # detached

    assert fired == ["pre", "post"] * 4


class HookingBackend(Backend):
    """Eager, and registers a forward hook on the module it builds for, as some backends do."""

    name = "hooking"

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def build(self, context: BuildContext) -> Built:
        context.module.register_forward_hook(lambda *_: self.log.append("backend"))
        return Built(run=context.forward)


def test_hooks_a_backend_adds_run_before_the_applications():
    log: list[str] = []
    block = _built_block(strategy=ait.OneBackendStrategy(HookingBackend(log), measure=FAST_MEASURE))
    block.register_forward_hook(lambda *_: log.append("application"))
    x = torch.randn(3, 8)
    block(x)
    block(x)
    log.clear()

    block(x)

    assert log == ["backend", "application"]


def test_a_copy_or_a_pickle_of_a_patched_module_is_a_plain_module():
    block = _built_block()
    x = torch.randn(3, 8)
    block(x)

    copied = copy.deepcopy(block)
    unpickled = pickle.loads(pickle.dumps(block))

    for clone in (copied, unpickled):
        assert clone.forward.__self__ is clone
        assert jit.active_session().find(clone) is None
        assert torch.equal(clone(x), block(x))


def test_modules_built_while_a_module_tunes_are_not_intercepted():
    built: list[nn.Module] = []

    class BuildsAModule(Backend):
        name = "builds_a_module"

        def build(self, context: BuildContext) -> Built:
            built.append(nn.Linear(2, 2))  # as exporters build wrapper modules
            return Built(run=context.forward)

    with jit.intercept(config(strategy=ait.OneBackendStrategy(BuildsAModule(), measure=FAST_MEASURE))):
        block = Block().eval()
        block(torch.randn(3, 8))
        block(torch.randn(3, 8))

    assert "forward" not in vars(built[0])


def _built_block(**options: Any) -> Block:
    with jit.intercept(config(**options)):
        return Block().eval()
