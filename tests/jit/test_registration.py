"""Explicit registration: one batch of existing modules, deduplicated, all-or-nothing, with reports and counts."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from tuning.conftest import FAST_MEASURE

import aitune.torch as ait
from aitune.errors import TuningError
from aitune.torch import jit
from aitune.torch.registry import MODULE_REGISTRY

from .conftest import Block, FailsFor, Net, config


def register(modules, **options) -> ait.JITRegistration:
    return ait.register_for_jit_tuning(modules, config(**options))


def run(net: nn.Module, times: int = 2) -> None:
    for _ in range(times):
        net(torch.randn(3, 8))


def test_registered_modules_tune_like_intercepted_ones_and_report_it():
    net = Net().eval()
    x = torch.randn(3, 8)
    expected = net(x)
    registration = register(net.blocks)

    run(net)

    assert registration.state_counts == {
        "init": 0,
        "recording": 0,
        "tuned": 2,
        "eager": 0,
        "skipped": 0,
        "detached": 0,
    }
    assert registration.all_tuned
    assert [entry["region_id"] for entry in registration.reports] == ["jit_module:Block", "jit_module:Block_1"]
    assert registration.reports[0]["state"] == "tuned"
    assert registration.reports[0]["graphs"][0]["winner"] == "eager"
    assert torch.allclose(net(x), expected)
    assert "forward" not in vars(net.head)  # only the registered modules are patched


def test_a_module_list_passed_directly_registers_its_elements():
    net = Net()

    registration = register(net.blocks)

    assert registration.modules == list(net.blocks)


def test_a_module_dict_passed_directly_registers_its_values():
    heads = nn.ModuleDict({"a": nn.Linear(2, 2), "b": nn.Linear(2, 2)})

    registration = register(heads)

    assert registration.modules == [heads["a"], heads["b"]]


def test_duplicates_are_registered_once_in_input_order():
    net = Net()

    registration = register([net.head, net.blocks[1], net.head, net.blocks[0], net.blocks[1]])

    assert registration.modules == [net.head, net.blocks[1], net.blocks[0]]


def test_modules_registered_by_path_are_named_by_their_path():
    net = Net().eval()
    registration = ait.register_for_jit_tuning(["blocks.0", "head"], config(), root=net)

    run(net)

    assert registration.modules == [net.blocks[0], net.head]
    assert [entry["region_id"] for entry in registration.reports] == ["jit_module:blocks.0", "jit_module:head"]


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("head", "got the path 'head' but no root; pass root="),
        (3, "item 1 is a int, not an nn.Module; pass modules only."),
        (nn.ModuleList([nn.Linear(2, 2)]), "item 1 is a ModuleList, which is never called; pass it on its own"),
    ],
)
def test_a_target_that_is_not_a_callable_module_is_rejected(item, message):
    with pytest.raises(TuningError, match=message):
        register([nn.Linear(2, 2), item])


def test_nothing_to_register_is_rejected():
    with pytest.raises(TuningError, match="register_for_jit_tuning got no modules"):
        register([])


def test_a_target_nested_in_a_tuned_target_is_detached_as_its_code_runs_inside():
    net = Net().eval()
    registration = register([net, net.blocks[0]])

    run(net)

    outer, inner = registration.patched
    assert (outer.state, inner.state) == (jit.JitState.TUNED, jit.JitState.DETACHED)
    assert inner.parent is outer and inner.absorbed_by is outer
    assert registration.all_tuned


def test_a_target_nested_in_a_target_that_fails_tunes_instead():
    net = Net().eval()
    registration = register([net, net.blocks[0]], strategy=ait.OneBackendStrategy(FailsFor(Net), measure=FAST_MEASURE))

    run(net)

    assert registration.state_counts["eager"] == registration.state_counts["tuned"] == 1
    assert not registration.all_tuned


def test_targets_sharing_a_submodule_tune_independently():
    shared = nn.Linear(8, 8)
    first, second = nn.Sequential(shared, nn.ReLU()), nn.Sequential(shared, nn.Tanh())
    registration = register([first, second])

    for _ in range(2):
        first(torch.randn(3, 8))
        second(torch.randn(3, 8))

    assert registration.state_counts["tuned"] == 2


def test_a_target_overlapping_an_aot_wrapper_is_rejected():
    net = Net()
    wrappers = ait.wrap(net, "blocks.0")
    try:
        with pytest.raises(TuningError, match=r"item 0 \(Net\) overlaps aitune.torch.Module 'blocks.0'"):
            register([net])
    finally:
        ait.unwrap(net, list(wrappers))


def test_only_one_batch_is_registered_per_process():
    register([Block()])

    with pytest.raises(TuningError, match="already registered for JIT tuning in this process, and it takes one batch"):
        register([Block()])


class Frozen(nn.Module):
    """A module that refuses to have its forward replaced."""

    def __setattr__(self, name: str, value: object) -> None:
        if name == "forward":
            raise AttributeError("forward is read-only on this module")
        super().__setattr__(name, value)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def test_a_failed_installation_patches_nothing_names_the_module_and_leaves_the_batch_free():
    good = Block()

    with pytest.raises(TuningError, match=r"could not patch item 1 \(Frozen\) .*read-only.*no module was registered"):
        register([good, Frozen()])

    assert "forward" not in vars(good)
    assert jit.active_session() is None and len(MODULE_REGISTRY) == 0
    register([good])  # the batch was not used up


def test_a_detached_registration_routes_cached_forwards_straight_to_the_originals():
    block = Block().eval()
    x = torch.randn(3, 8)
    expected = block(x)
    registration = register([block])
    cached = block.forward
    run(block)

    registration.detach()

    assert registration.state_counts["detached"] == 1
    assert "forward" not in vars(block)
    assert torch.equal(cached(x), expected)
    assert jit.active_session() is None and len(MODULE_REGISTRY) == 0


def test_reports_are_fresh_on_every_read():
    block = Block().eval()
    registration = register([block])
    run(block)

    registration.reports[0]["graphs"][0]["candidates"].clear()
    registration.reports[0]["state"] = "changed"

    assert registration.reports[0]["state"] == "tuned" and registration.reports[0]["graphs"][0]["candidates"]


def test_a_registration_used_as_a_context_manager_detaches_on_exit():
    block = Block()

    with register([block]):
        assert "forward" in vars(block)

    assert "forward" not in vars(block)
