"""Backends a wrapper can be tuned with; each builds one graph from the module and its recorded samples."""

from __future__ import annotations

from typing import Any

from aitune.errors import TuningError
from aitune.torch.backends.base import Backend, BackendError, BuildContext, Built, SizesOutsideBuild
from aitune.torch.backends.eager import AutocastBackend, EagerBackend
from aitune.torch.backends.inductor import InductorBackend
from aitune.torch.backends.onnxruntime import OnnxRuntimeBackend
from aitune.torch.backends.precision import Bf16Backend, Int8DynamicBackend
from aitune.torch.backends.tensorrt import TensorRTBackend

BACKENDS: dict[str, type[Backend]] = {
    backend.name: backend
    for backend in (
        EagerBackend,
        AutocastBackend,
        InductorBackend,
        OnnxRuntimeBackend,
        TensorRTBackend,
        Bf16Backend,
        Int8DynamicBackend,
    )
}


def default_backends() -> list[Backend]:
    """The candidates tried when none are given, in first-wins order; unavailable ones are skipped with a reason.

    Inductor with CUDA graphs runs on a CUDA device only: on an H200 it gave a ResNet-18-like backbone
    4.0× where plain Inductor gave 2.1× (launch-bound small batches are where CUDA graphs pay)."""
    return [
        InductorBackend(),
        InductorBackend(mode="reduce-overhead"),
        OnnxRuntimeBackend(),
        TensorRTBackend(),
        AutocastBackend("bfloat16"),
    ]


def precision_backends(precision: str) -> list[Backend]:
    """The candidates tuned at ``precision``: for a reduced level, the backends that realise it (bf16: the cast
    copy, eager and compiled with freezing, and on a CUDA device a TensorRT engine allowed bfloat16 kernels;
    int8: dynamic quantization of the linear layers) and then the fp32 defaults; the defaults alone for fp32.

    The fp32 backends stay among the candidates because a reduced level is asked for a faster model (issue 43:
    int8 alone made a BERT-style classifier 0.86× end to end where the fp32 loop gave 2.59×), so whichever is
    fastest within the quality bar wins (docs/tuning.md, "Reduced precision")."""
    if precision == "bf16":
        return [Bf16Backend(), Bf16Backend(compile=True), TensorRTBackend(bf16=True), *default_backends()]
    if precision == "int8":
        return [Int8DynamicBackend(), *default_backends()]
    return default_backends()


def backend_from_dict(data: dict[str, Any]) -> Backend:
    """The backend ``Backend.to_dict`` described."""
    kind = BACKENDS.get(data.get("name", ""))
    if kind is None:
        raise TuningError(f"unknown backend {data.get('name')!r} in a saved wrapper; known: {', '.join(BACKENDS)}.")
    return kind(**data.get("config", {}))


__all__ = [
    "BACKENDS",
    "AutocastBackend",
    "Backend",
    "BackendError",
    "Bf16Backend",
    "BuildContext",
    "Built",
    "EagerBackend",
    "InductorBackend",
    "Int8DynamicBackend",
    "OnnxRuntimeBackend",
    "SizesOutsideBuild",
    "TensorRTBackend",
    "backend_from_dict",
    "default_backends",
    "precision_backends",
]
