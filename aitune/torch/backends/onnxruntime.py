"""ONNX Runtime: the graph exported with the dynamo exporter, run on the CPU (or CUDA) execution provider.

Threads follow torch's (`aitune.torch.backends.threads`): ``intra_op_num_threads`` is torch's intra-op
count read at build, operators run one after another (sequential execution, one inter-op thread), and
spinning is disabled. ORT's defaults (every core, spinning) ran a GRU at 44–56 ms a call against 0.9 ms
with one thread, and slowed whatever ran next: the next candidate measured and the user's own glue code.
"""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path
from typing import Any

import torch
import torch.utils._pytree as pytree

from aitune.torch.backends.base import Backend, BackendError, BuildContext, Built, SizesOutsideBuild
from aitune.torch.backends.onnx_export import export_onnx, output_spec, tensor_inputs
from aitune.torch.backends.threads import ThreadBudget, torch_threads

_NO_SPINNING = {"session.intra_op.allow_spinning": "0", "session.inter_op.allow_spinning": "0"}


class OnnxRuntimeBackend(Backend):
    """ONNX Runtime InferenceSession; CPU execution provider, CUDA's when tuning on a CUDA device."""

    name = "onnxruntime"

    def __init__(self, intra_op_threads: int | None = None) -> None:
        # None (or 0, as plans written before the thread budget say): torch's count when the session is built.
        self.intra_op_threads = intra_op_threads or None

    def config(self) -> dict[str, Any]:
        """The thread count a session gets: the given one, else torch's now — never ORT's "0: all cores"."""
        return {"intra_op_threads": self.threads().intra_op}

    def threads(self) -> ThreadBudget:
        """Intra-op: the given count or torch's; inter-op: one, as the session runs operators in sequence."""
        return ThreadBudget(intra_op=self.intra_op_threads or torch_threads().intra_op, inter_op=1)

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

        from aitune.torch.backends.held_memory import measuring, prime_onnxruntime

        spec = output_spec(context.reference_outputs[0])
        with tempfile.TemporaryDirectory(prefix="aitune-ort-") as directory:  # the session keeps what it loaded
            exported = export_onnx(context, Path(directory))
            prime_onnxruntime()
            # Around the session only: its copy of the weights, not the exporter's leftovers.
            with measuring(context.device) as held:
                session = onnxruntime.InferenceSession(
                    str(exported), self._options(onnxruntime), providers=_providers(context.device)
                )
        names = [node.name for node in session.get_inputs()]
        fixed = [fixed_sizes(node.shape) for node in session.get_inputs()]
        device = context.device
        used = session.get_session_options()

        def run(*args: Any, **kwargs: Any) -> Any:
            tensors = tensor_inputs(args, kwargs)
            if len(tensors) != len(names):
                raise BackendError(f"the exported graph takes {len(names)} tensors, the call passed {len(tensors)}")
            outside = sizes_outside(fixed, [tuple(t.shape) for t in tensors])
            if outside is not None:
                raise SizesOutsideBuild(outside)
            feed = {name: t.detach().cpu().contiguous().numpy() for name, t in zip(names, tensors, strict=True)}
            outputs = [torch.from_numpy(array).to(device) for array in session.run(None, feed)]
            return pytree.tree_unflatten(outputs, spec)

        details = {
            "providers": session.get_providers(),
            "intra_op_threads": used.intra_op_num_threads,
            "inter_op_threads": used.inter_op_num_threads,
        }
        return Built(run=run, details=details, held=held)

    def _options(self, onnxruntime: Any) -> Any:
        threads = self.threads()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads.intra_op
        options.inter_op_num_threads = threads.inter_op
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3  # errors only: warnings about unused initializers are noise here
        for key, value in _NO_SPINNING.items():
            options.add_session_config_entry(key, value)
        return options


def fixed_sizes(shape: list[Any]) -> tuple[int | None, ...]:
    """An ONNX input's shape with its dynamic dimensions (named, or unknown) as None."""
    return tuple(dim if isinstance(dim, int) else None for dim in shape)


def sizes_outside(fixed: list[tuple[int | None, ...]], sizes: list[tuple[int, ...]]) -> str | None:
    """Why a call's tensor sizes are not the ones the export fixed (the first that differs), or None if they are."""
    for index, (wanted, given) in enumerate(zip(fixed, sizes, strict=True)):
        if len(wanted) != len(given):
            return f"input {index} has {len(given)} dimensions; the export has {len(wanted)}"
        for dim, (size, actual) in enumerate(zip(wanted, given, strict=True)):
            if size is not None and size != actual:
                return f"dimension {dim} of input {index} is {actual}; the export fixed it at {size}"
    return None


def _providers(device: torch.device) -> list[Any]:
    if device.type == "cuda":
        return [("CUDAExecutionProvider", {"device_id": device.index or 0}), "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]
