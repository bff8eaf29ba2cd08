"""Backends a wrapper can be tuned with; each builds one graph from the module and its recorded samples."""

from __future__ import annotations

from typing import Any

from aitune.errors import TuningError
from aitune.torch.backends.base import Backend, BackendError, BuildContext, Built
from aitune.torch.backends.eager import AutocastBackend, EagerBackend
from aitune.torch.backends.inductor import InductorBackend
from aitune.torch.backends.onnxruntime import OnnxRuntimeBackend
from aitune.torch.backends.tensorrt import TensorRTBackend

BACKENDS: dict[str, type[Backend]] = {
    backend.name: backend
    for backend in (EagerBackend, AutocastBackend, InductorBackend, OnnxRuntimeBackend, TensorRTBackend)
}


def default_backends() -> list[Backend]:
    """The candidates tried when none are given, in first-wins order; unavailable ones are skipped with a reason."""
    return [InductorBackend(), OnnxRuntimeBackend(), TensorRTBackend(), AutocastBackend("bfloat16")]


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
    "BuildContext",
    "Built",
    "EagerBackend",
    "InductorBackend",
    "OnnxRuntimeBackend",
    "TensorRTBackend",
    "backend_from_dict",
    "default_backends",
]
