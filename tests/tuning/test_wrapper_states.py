"""The AOT wrapper behaves like its module in every state and moves between states by the documented rules."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import aitune.torch as ait
from aitune.errors import TuningError
from aitune.torch.registry import MODULE_REGISTRY

from .conftest import FAST_MEASURE, eager_strategy, tiny_mlp


def recorded(wrapped, *inputs: torch.Tensor) -> ait.Module:
    wrapper = wrapped(tiny_mlp(), name="mlp")
    wrapper.enable_recording()
    for x in inputs:
        wrapper(x)
    return wrapper


def test_a_new_wrapper_is_in_init_and_returns_the_modules_outputs(wrapped):
    module = tiny_mlp()
    x = torch.randn(2, 8)
    expected = module(x)

    wrapper = wrapped(module, name="mlp")

    assert wrapper.state is ait.ModuleState.INIT
    assert torch.equal(wrapper(x), expected)
    assert isinstance(wrapper, nn.Sequential) and isinstance(wrapper, ait.Module)
    assert wrapper[0] is module[0] and wrapper.training is False


def test_recording_keeps_one_graph_spec_per_input_structure_with_its_shape_range(wrapped):
    wrapper = recorded(wrapped, torch.randn(2, 8), torch.randn(5, 8), torch.randn(1, 3, 8))

    specs = wrapper.graph_specs

    assert [spec.sample_count for spec in specs] == [2, 1]
    assert (specs[0].min_shapes, specs[0].max_shapes) == ([[2, 8]], [[5, 8]])
    assert specs[0].dynamic_dims() == [[0]]


class Scale(nn.Module):
    def forward(self, x: torch.Tensor, factor: float = 1.0) -> torch.Tensor:
        return x * factor


def test_non_tensor_arguments_are_part_of_the_graph_identity(wrapped):
    wrapper = wrapped(Scale(), name="scale")
    wrapper.enable_recording()

    wrapper(torch.randn(2), factor=2.0)
    wrapper(torch.randn(3), factor=2.0)
    wrapper(torch.randn(2), factor=3.0)

    assert [spec.sample_count for spec in wrapper.graph_specs] == [2, 1]


def test_the_first_call_of_a_new_wrapper_starts_recording(wrapped):
    wrapper = wrapped(tiny_mlp(), name="mlp")

    wrapper(torch.randn(2, 8))
    wrapper(torch.randn(3, 8))

    assert wrapper.state is ait.ModuleState.RECORDING
    assert [spec.sample_count for spec in wrapper.graph_specs] == [2]


def test_wrap_call_tune_works_as_with_aitune(wrapped):
    module = tiny_mlp()
    x = torch.randn(2, 8)
    expected = module(x)

    m = wrapped(module, name="mlp")
    m(x)
    report = m.tune(strategy=eager_strategy())

    assert m.state is ait.ModuleState.TUNED
    assert report["graphs"][0]["winner"] == "eager"
    assert torch.equal(m(x), expected)


def test_tune_before_any_call_names_the_module_and_the_fix(wrapped):
    wrapper = wrapped(tiny_mlp(), name="mlp")

    with pytest.raises(TuningError, match=r"^module 'mlp' has no recorded calls; run it on representative inputs"):
        wrapper.tune(strategy=eager_strategy())


def test_tune_in_passthrough_says_to_enable_recording_first(wrapped):
    wrapper = wrapped(tiny_mlp(), name="mlp")
    wrapper.enable_passthrough()
    wrapper(torch.randn(2, 8))

    with pytest.raises(TuningError, match=r"no recorded calls; call enable_recording\(\), then run it on"):
        wrapper.tune(strategy=eager_strategy())


def test_tuning_switches_to_tuned_and_keeps_the_outputs(wrapped):
    x = torch.randn(2, 8)
    wrapper = recorded(wrapped, x)
    expected = wrapper(x)

    report = wrapper.tune(strategy=eager_strategy())

    assert wrapper.state is ait.ModuleState.TUNED
    assert report["graphs"][0]["winner"] == "eager"
    assert torch.equal(wrapper(x), expected)


def test_tuned_cannot_be_left_without_force(wrapped):
    wrapper = recorded(wrapped, torch.randn(2, 8))
    wrapper.tune(strategy=eager_strategy())

    with pytest.raises(TuningError, match="pass force=True to enable_passthrough"):
        wrapper.enable_passthrough()
    with pytest.raises(TuningError, match="pass force=True to enable_recording"):
        wrapper.enable_recording()
    with pytest.raises(TuningError, match="already tuned"):
        wrapper.tune(strategy=eager_strategy())
    assert wrapper.state is ait.ModuleState.TUNED


@pytest.mark.parametrize("leave", ["enable_passthrough", "enable_recording"])
def test_forcing_out_of_tuned_drops_backends_and_graphs(wrapped, leave):
    wrapper = recorded(wrapped, torch.randn(2, 8))
    wrapper.tune(strategy=eager_strategy())

    getattr(wrapper, leave)(force=True)

    assert wrapper.state.value == leave.removeprefix("enable_")
    assert wrapper.graph_specs == []
    assert wrapper.to_dict()["tuned_backends"] == {}


def test_passthrough_records_nothing(wrapped):
    wrapper = wrapped(tiny_mlp(), name="mlp")
    wrapper.enable_passthrough()

    wrapper(torch.randn(2, 8))

    assert wrapper.state is ait.ModuleState.PASSTHROUGH and wrapper.graph_specs == []


def test_dry_run_reports_but_keeps_the_state(wrapped):
    wrapper = recorded(wrapped, torch.randn(2, 8))

    report = wrapper.tune(strategy=eager_strategy(), dry_run=True)

    assert report["graphs"][0]["candidates"][0]["status"] == "winner"
    assert wrapper.state is ait.ModuleState.RECORDING


def test_user_forward_hooks_fire_once_per_call_in_every_state(wrapped):
    wrapper = wrapped(tiny_mlp(), name="mlp")
    pre_calls, post_calls = [], []
    wrapper.register_forward_pre_hook(lambda module, args: pre_calls.append(1))
    wrapper.register_forward_hook(lambda module, args, output: post_calls.append(1))
    x = torch.randn(2, 8)

    wrapper(x)
    wrapper.enable_recording()
    wrapper(x)
    wrapper.tune(strategy=eager_strategy())
    wrapper(x)

    assert (len(pre_calls), len(post_calls)) == (3, 3)


def test_state_dict_is_the_modules_in_every_state(wrapped):
    module = tiny_mlp()
    parent = nn.Sequential(module)
    expected = {key: value.clone() for key, value in parent.state_dict().items()}
    wrapper = wrapped(module, name="mlp")
    parent[0] = wrapper
    seen = [parent.state_dict()]

    wrapper.enable_recording()
    wrapper(torch.randn(2, 8))
    seen.append(parent.state_dict())
    wrapper.tune(strategy=eager_strategy())
    seen.append(parent.state_dict())

    for state_dict in seen:
        assert state_dict.keys() == expected.keys()
        assert all(torch.equal(state_dict[key], expected[key]) for key in expected)


def test_to_dict_from_dict_restores_a_tuned_wrapper_without_recording(wrapped):
    x = torch.randn(2, 8)
    wrapper = recorded(wrapped, x)
    expected = wrapper(x)
    wrapper.tune(strategy=ait.OneBackendStrategy(ait.OnnxRuntimeBackend(), measure=FAST_MEASURE))
    saved = wrapper.to_dict()
    module = wrapper.close()

    restored = ait.Module.from_dict(module, saved)
    try:
        assert restored.state is ait.ModuleState.TUNED
        assert [spec.to_dict() for spec in restored.graph_specs] == saved["graphs"]
        assert restored.to_dict() == saved
        assert saved["tuned_backends"][saved["graphs"][0]["graph_id"]]["name"] == "onnxruntime"
        assert torch.allclose(restored(x), expected, atol=1e-5)
    finally:
        restored.close()


def test_from_dict_refuses_a_dict_it_did_not_write():
    with pytest.raises(TuningError, match=r"was not written by aitune\.torch\.Module\.to_dict"):
        ait.Module.from_dict(tiny_mlp(), {"name": "x"})


def test_close_restores_forward_and_unregisters():
    module = tiny_mlp()
    wrapper = ait.Module(module, name="mlp")
    assert "aot_module:mlp" in MODULE_REGISTRY

    assert wrapper.close() is module

    assert "forward" not in vars(module)
    assert "aot_module:mlp" not in MODULE_REGISTRY


def test_names_explicit_must_be_free_and_default_ones_get_a_suffix(wrapped):
    first, second = wrapped(tiny_mlp()), wrapped(tiny_mlp())

    assert (first.name, second.name) == ("Sequential", "Sequential_1")
    with pytest.raises(TuningError, match="named 'Sequential' already exists"):
        ait.Module(tiny_mlp(), name="Sequential")


def test_wrapping_twice_or_wrapping_a_non_module_is_refused(wrapped):
    module = tiny_mlp()
    wrapped(module, name="mlp")

    with pytest.raises(TuningError, match="already wrapped"):
        ait.Module(module)
    with pytest.raises(TuningError, match=r"wraps an nn\.Module, not list"):
        ait.Module([])
