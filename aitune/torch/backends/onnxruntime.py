"""ONNX Runtime: the graph exported with the dynamo exporter, run on the CPU (or CUDA) execution provider.

Thread spinning is disabled: ORT's default spinning threads slowed whatever ran next on this 2-core
machine, both the next candidate being measured and the user's own glue code between calls.
"""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path
from typing import Any

import torch
import torch.utils._pytree as pytree

from aitune.torch.backends.base import Backend, BackendError, BuildContext, Built
from aitune.torch.backends.onnx_export import export_onnx, output_spec, tensor_inputs

_NO_SPINNING = {"session.intra_op.allow_spinning": "0", "session.inter_op.allow_spinning": "0"}


class OnnxRuntimeBackend(Backend):
    """ONNX Runtime InferenceSession; CPU execution provider, CUDA's when tuning on a CUDA device."""

    name = "onnxruntime"

    def __init__(self, intra_op_threads: int = 0) -> None:
        self.intra_op_threads = intra_op_threads  # 0: ONNX Runtime's default

    def config(self) -> dict[str, Any]:
        return {"intra_op_threads": self.intra_op_threads}

    def unavailable_reason(self, device: torch.device) -> str | None:
        if importlib.util.find_spec("onnxruntime") is None or importlib.util.find_spec("onnxscript") is None:
            return "onnxruntime/onnxscript are not installed (pip install 'aitune[onnx]')"
        if device.type == "cuda":
            import onnxruntime

            if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
                return "this onnxruntime has no CUDA execution provider (pip install onnxruntime-gpu)"
        elif device.type != "cpu":
            return f"no ONNX Runtime execution provider is wired for device type '{device.type}'"
        return None

    def build(self, context: BuildContext) -> Built:
        import onnxruntime

        spec = output_spec(context.reference_outputs[0])
        with tempfile.TemporaryDirectory(prefix="aitune-ort-") as directory:  # the session keeps what it loaded
            session = onnxruntime.InferenceSession(
                str(export_onnx(context, Path(directory))),
                self._options(onnxruntime),
                providers=_providers(context.device),
            )
        names = [node.name for node in session.get_inputs()]
        device = context.device

        def run(*args: Any, **kwargs: Any) -> Any:
            tensors = tensor_inputs(args, kwargs)
            if len(tensors) != len(names):
                raise BackendError(f"the exported graph takes {len(names)} tensors, the call passed {len(tensors)}")
            feed = {name: t.detach().cpu().contiguous().numpy() for name, t in zip(names, tensors, strict=True)}
            outputs = [torch.from_numpy(array).to(device) for array in session.run(None, feed)]
            return pytree.tree_unflatten(outputs, spec)

        return Built(run=run, details={"providers": session.get_providers()})

    def _options(self, onnxruntime: Any) -> Any:
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = self.intra_op_threads
        options.log_severity_level = 3  # errors only: warnings about unused initializers are noise here
        for key, value in _NO_SPINNING.items():
            options.add_session_config_entry(key, value)
        return options


def _providers(device: torch.device) -> list[Any]:
    if device.type == "cuda":
        return [("CUDAExecutionProvider", {"device_id": device.index or 0}), "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]
