"""TensorRT: the graph exported to ONNX, parsed and built into an engine with the TensorRT Python API.

Imported lazily: ``tensorrt`` is an optional extra (``pip install 'aitune[tensorrt]'``) and needs a
CUDA device. One optimization profile spans the recorded shape range of every input.
"""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path
from typing import Any

import torch
import torch.utils._pytree as pytree

from aitune.torch.backends.base import Backend, BackendError, BuildContext, Built
from aitune.torch.backends.onnx_export import export_onnx, output_spec, shape_ranges, tensor_inputs
from aitune.torch.precision import precision_unavailable


class TensorRTBackend(Backend):
    """A TensorRT engine; ``fp16`` lets TensorRT pick half-precision kernels (the gate must admit float16);
    ``bf16`` lets it pick bfloat16 ones, a reduced precision judged on the task (``--precision bf16``)."""

    name = "tensorrt"

    def __init__(self, fp16: bool = False, workspace_gib: float = 4.0, bf16: bool = False) -> None:
        self.fp16 = fp16
        self.bf16 = bf16
        self.workspace_gib = workspace_gib
        self.reduced_precision = torch.float16 if fp16 else None
        self.precision = "bf16" if bf16 else "fp32"

    def config(self) -> dict[str, Any]:
        return {"fp16": self.fp16, "bf16": self.bf16, "workspace_gib": self.workspace_gib}

    def unavailable_reason(self, device: torch.device) -> str | None:
        if device.type != "cuda" or not torch.cuda.is_available():
            return "TensorRT needs a CUDA device; tune with device='cuda' on a machine that has one"
        if importlib.util.find_spec("tensorrt") is None:
            return "tensorrt is not installed (pip install 'aitune[tensorrt]')"
        return precision_unavailable("bf16", device) if self.bf16 else None

    def build(self, context: BuildContext) -> Built:
        import tensorrt as trt

        spec = output_spec(context.reference_outputs[0])
        logger = trt.Logger(trt.Logger.ERROR)
        engine = trt.Runtime(logger).deserialize_cuda_engine(self._serialized_engine(trt, logger, context))
        if engine is None:
            raise BackendError("TensorRT could not deserialize the engine it just built")
        execution = engine.create_execution_context()
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        inputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        outputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.OUTPUT]
        dtypes = {n: torch_dtype(trt, engine.get_tensor_dtype(n)) for n in outputs}
        device = context.device

        def run(*args: Any, **kwargs: Any) -> Any:
            tensors = [t.to(device).contiguous() for t in tensor_inputs(args, kwargs)]
            if len(tensors) != len(inputs):
                raise BackendError(f"the engine takes {len(inputs)} tensors, the call passed {len(tensors)}")
            for name, tensor in zip(inputs, tensors, strict=True):
                execution.set_input_shape(name, tuple(tensor.shape))
                execution.set_tensor_address(name, tensor.data_ptr())
            results = []
            for name in outputs:
                result = torch.empty(tuple(execution.get_tensor_shape(name)), dtype=dtypes[name], device=device)
                execution.set_tensor_address(name, result.data_ptr())
                results.append(result)
            if not execution.execute_async_v3(torch.cuda.current_stream(device).cuda_stream):
                raise BackendError("TensorRT failed to enqueue the engine")
            return pytree.tree_unflatten(results, spec)

        return Built(run=run, details={"inputs": inputs, "outputs": outputs})

    def _serialized_engine(self, trt: Any, logger: Any, context: BuildContext) -> Any:
        builder = trt.Builder(logger)
        network = builder.create_network(0)
        parser = trt.OnnxParser(network, logger)
        with tempfile.TemporaryDirectory(prefix="aitune-trt-") as directory:
            if not parser.parse_from_file(str(export_onnx(context, Path(directory)))):
                errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
                raise BackendError(f"TensorRT could not parse the exported ONNX graph: {errors}")
        config = builder.create_builder_config()
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(self.workspace_gib * (1 << 30)))
        if self.fp16:
            config.set_flag(trt.BuilderFlag.FP16)
        if self.bf16:
            config.set_flag(trt.BuilderFlag.BF16)
        profile = builder.create_optimization_profile()
        for index, (low, high) in enumerate(shape_ranges(context)):
            profile.set_shape(network.get_input(index).name, low, high, high)
        config.add_optimization_profile(profile)
        serialized = builder.build_serialized_network(network, config)
        if serialized is None:
            raise BackendError("TensorRT could not build an engine for this graph")
        return serialized


_TORCH_DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int8": torch.int8,
    "int32": torch.int32,
    "int64": torch.int64,
    "bool": torch.bool,
}
"""TensorRT dtype attribute name → the torch dtype of the same layout."""


def torch_dtype(trt: Any, dtype: Any) -> torch.dtype:
    """The torch dtype for TensorRT's ``dtype``; `BackendError` when there is none.

    Only the names this ``tensorrt`` module has are mapped: an older TensorRT lacks ``int64`` and
    ``bfloat16``, and standing another dtype in for a missing one would give that one the wrong torch
    dtype (``int32`` outputs read as ``int64``).
    """
    table = {getattr(trt, name): torch_type for name, torch_type in _TORCH_DTYPES.items() if hasattr(trt, name)}
    if dtype not in table:
        raise BackendError(f"TensorRT output dtype {dtype} has no torch equivalent here")
    return table[dtype]
