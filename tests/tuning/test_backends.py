"""Real backends end to end on tiny modules: ONNX Runtime, Inductor (slow: first compile), GPU ones where present."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn

import aitune.torch as ait
from aitune.torch.backends import BackendError, BuildContext, default_backends
from aitune.torch.backends.inductor import owned_outputs
from aitune.torch.backends.tensorrt import torch_dtype
from aitune.torch.graphs.graph_spec import Sample

from .conftest import FAST_MEASURE, tiny_mlp

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
needs_tensorrt = pytest.mark.skipif(importlib.util.find_spec("tensorrt") is None, reason="needs tensorrt")


def context(module: nn.Module, *inputs: torch.Tensor, device: str = "cpu") -> BuildContext:
    module = module.to(device)
    samples = [Sample((x.to(device),), {}) for x in inputs]
    with torch.no_grad():
        references = [module(*sample.args) for sample in samples]
    return BuildContext(module, module.forward, samples, references, torch.device(device))


def max_error(built, build_context: BuildContext) -> float:
    with torch.no_grad():
        pairs = zip(build_context.samples, build_context.reference_outputs, strict=True)
        return max(float((built.run(*s.args) - reference).abs().max()) for s, reference in pairs)


def test_onnxruntime_serves_every_recorded_shape():
    build_context = context(tiny_mlp(), torch.randn(2, 8), torch.randn(5, 8))

    built = ait.OnnxRuntimeBackend().build(build_context)

    assert built.details["providers"] == ["CPUExecutionProvider"]
    assert max_error(built, build_context) < 1e-5


@pytest.mark.slow
def test_inductor_compiles_each_instance_frozen_and_separately():
    first, second = tiny_mlp(), tiny_mlp()
    with torch.no_grad():
        second[0].weight.mul_(2.0)  # same class and code, different weights
    x = torch.randn(2, 8)

    builds = [ait.InductorBackend().build(context(module, x)) for module in (first, second)]
    with torch.no_grad():
        outputs = [built.run(x) for built in builds]
        first[0].weight.zero_()  # frozen weights are constants: editing the module no longer changes the build
        frozen = builds[0].run(x)

    assert all(built.details["graphs"] >= 1 for built in builds)
    assert not torch.allclose(outputs[0], outputs[1])
    assert torch.equal(frozen, outputs[0])


@pytest.mark.gpu
@needs_cuda
def test_onnxruntime_cuda_execution_provider_matches_eager():
    if "CUDAExecutionProvider" not in __import__("onnxruntime").get_available_providers():
        pytest.skip("onnxruntime has no CUDA execution provider")
    build_context = context(tiny_mlp(), torch.randn(2, 8), device="cuda")

    built = ait.OnnxRuntimeBackend().build(build_context)

    assert built.details["providers"][0] == "CUDAExecutionProvider"
    assert max_error(built, build_context) < 1e-4


@pytest.mark.gpu
@needs_cuda
@needs_tensorrt
def test_tensorrt_engine_matches_eager_over_the_recorded_shape_range():
    build_context = context(tiny_mlp(), torch.randn(2, 8), torch.randn(6, 8), device="cuda")

    built = ait.TensorRTBackend().build(build_context)

    assert max_error(built, build_context) < 1e-3


@pytest.mark.gpu
@needs_cuda
def test_a_module_tuned_on_cuda_stays_on_cuda_only_with_a_winner(wrapped):
    wrapper = wrapped(tiny_mlp(), name="mlp")
    wrapper.enable_recording()
    wrapper(torch.randn(2, 8))

    wrapper.tune(device="cuda", strategy=ait.FirstWinsStrategy([ait.OnnxRuntimeBackend()], measure=FAST_MEASURE))

    winner = wrapper.tuning_report["graphs"][0]["winner"]
    assert wrapper.device.type == ("cuda" if winner != "eager" else "cpu")


def test_the_default_backends_offer_inductor_with_cuda_graphs_on_a_cuda_device_only():
    cuda_graphs = [backend for backend in default_backends() if backend.config().get("mode") == "reduce-overhead"]

    assert len(cuda_graphs) == 1
    assert cuda_graphs[0].unavailable_reason(torch.device("cpu")) == (
        "CUDA graphs (mode 'reduce-overhead') replay on a CUDA device only"
    )
    assert cuda_graphs[0].unavailable_reason(torch.device("cuda")) is None


def test_a_replayed_graphs_outputs_are_copied_out_for_the_caller():
    buffer = torch.zeros(2)  # a CUDA graph's static output: every replay writes into it

    def replay(x: torch.Tensor) -> dict[str, Any]:
        return {"y": buffer.copy_(x), "steps": 1}

    run = owned_outputs(replay)
    first, second = run(torch.ones(2)), run(torch.full((2,), 2.0))

    assert (first["y"].tolist(), second["y"].tolist(), second["steps"]) == ([1.0, 1.0], [2.0, 2.0], 1)


@pytest.mark.gpu
@needs_cuda
def test_a_cuda_graph_build_returns_outputs_that_a_later_call_leaves_alone(wrapped):
    # A CUDA graph writes every call's outputs into the same buffers: the gate compares two samples of
    # one graph after both ran, and a caller may keep each call's output.
    wrapper = wrapped(tiny_mlp().cuda(), name="mlp")
    inputs = [torch.randn(2, 8, device="cuda") for _ in range(3)]
    with torch.no_grad():
        expected = [wrapper.module(x) for x in inputs]
    wrapper.enable_recording()
    for x in inputs[:2]:
        wrapper(x)

    wrapper.tune(
        device="cuda",
        strategy=ait.OneBackendStrategy(ait.InductorBackend(mode="reduce-overhead"), measure=FAST_MEASURE),
    )
    with torch.no_grad():
        kept = [wrapper(x) for x in inputs]

    assert wrapper.tuning_report["graphs"][0]["winner"] == "inductor"
    assert all(torch.allclose(out, ref, rtol=1e-2, atol=1e-3) for out, ref in zip(kept, expected, strict=True))


def _stand_in_tensorrt(*names: str) -> SimpleNamespace:
    # Only the dtype attributes of the `tensorrt` module, each a distinct value like its DataType
    # members: what the mapping reads, not TensorRT itself (its own test below needs the real module).
    return SimpleNamespace(**{name: f"DataType.{name.upper()}" for name in names})


OLD_TENSORRT = ("float32", "float16", "int8", "int32", "bool")  # TensorRT 8.5: no int64, no bfloat16
NEW_TENSORRT = (*OLD_TENSORRT, "int64", "bfloat16")


@pytest.mark.parametrize("names", [OLD_TENSORRT, NEW_TENSORRT], ids=["without-int64-bfloat16", "with-them"])
def test_each_tensorrt_dtype_maps_to_its_own_torch_dtype_and_a_missing_one_replaces_nothing(names):
    trt = _stand_in_tensorrt(*names)

    mapped = {name: torch_dtype(trt, getattr(trt, name)) for name in names}

    assert mapped == {name: getattr(torch, name) for name in names}


def test_a_tensorrt_dtype_without_a_torch_twin_is_one_sentence():
    trt = _stand_in_tensorrt(*OLD_TENSORRT, "fp8")

    with pytest.raises(BackendError, match=r"^TensorRT output dtype DataType.FP8 has no torch equivalent here$"):
        torch_dtype(trt, trt.fp8)


@needs_tensorrt
def test_the_installed_tensorrts_dtypes_map_to_their_torch_twins():
    import tensorrt as trt

    names = [name for name in NEW_TENSORRT if hasattr(trt, name)]

    assert {name: torch_dtype(trt, getattr(trt, name)) for name in names} == {n: getattr(torch, n) for n in names}


def test_bf16_offers_a_tensorrt_engine_with_its_bf16_flag_judged_on_the_task_and_plans_keep_the_flag():
    from aitune.torch.backends import TensorRTBackend, backend_from_dict, precision_backends
    from aitune.torch.tuning.plan_schema import plan_schema

    engine = next(backend for backend in precision_backends("bf16") if backend.name == "tensorrt")
    again = backend_from_dict(engine.to_dict())
    tensorrt_config = plan_schema()["$defs"]["TensorrtConfig"]["properties"]

    assert (engine.precision, engine.config()["bf16"], again.bf16, again.precision) == ("bf16", True, True, "bf16")
    assert "bf16" in tensorrt_config and TensorRTBackend().config()["bf16"] is False
    assert backend_from_dict({"name": "tensorrt", "config": {"fp16": False, "workspace_gib": 4.0}}).bf16 is False
    assert all(backend.precision == "fp32" for backend in precision_backends("fp32"))
    if not torch.cuda.is_available():
        assert engine.unavailable_reason(torch.device("cpu")).startswith("TensorRT needs a CUDA device")
