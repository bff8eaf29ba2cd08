"""The one interface every backend implements: build from a module and its recorded samples, run, describe.

A backend never sees the wrapper: it gets the module's original ``forward`` (no hooks, no dispatch),
the recorded samples of one graph, the reference outputs and the target device.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

if TYPE_CHECKING:  # the module package imports the tuner, which imports backends
    from aitune.torch.graphs.graph_spec import Sample


class BackendError(RuntimeError):
    """A backend could not build or run this graph; the tuner records why and moves on."""


class SizesOutsideBuild(BackendError):
    """A call whose tensor sizes the build cannot take (an export fixed them), raised before anything runs:
    that call runs eager and the build stays for the sizes it takes."""


@dataclass
class BuildContext:
    """Everything a backend may use to build one graph of a module."""

    module: nn.Module
    forward: Callable[..., Any]  # the module's original forward: no hooks, no wrapper dispatch
    samples: list[Sample]
    reference_outputs: list[Any]  # forward's outputs on ``samples``, in order
    device: torch.device
    dynamic_shapes: Any = None  # the user's override for exporters, one entry per tensor input
    reference_states: list[Any] = field(default_factory=list)  # per sample: its inputs after forward, or None


def _nothing() -> None:
    return None


@dataclass
class Built:
    """A built candidate: ``run`` takes the module's arguments; ``release`` frees what the build holds;
    ``details`` (JSON-ready) says what the build chose, such as ONNX Runtime's providers, and goes into
    the tuning report as the candidate's ``build_details``; ``held``, when the backend measured it, the
    memory what it keeps holds (else the trial measures the whole build)."""

    run: Callable[..., Any]
    release: Callable[[], None] = _nothing
    details: dict[str, Any] = field(default_factory=dict)
    held: Any = None  # a HeldMemory the backend measured around what it keeps (aitune.torch.backends.held_memory)


class Backend(ABC):
    """A way to run a module's forward; subclasses set ``name`` and implement ``build``."""

    name: ClassVar[str]
    reduced_precision: torch.dtype | None = None  # set by backends that compute in a lower precision
    precision: ClassVar[str] = "fp32"  # a reduced level (bf16, int8) is offered only when tuning at it

    def unavailable_reason(self, device: torch.device) -> str | None:
        """One line saying why this backend cannot run on ``device`` here, or None when it can."""
        return None

    def unsuited_reason(self, module: nn.Module) -> str | None:
        """One line saying why this backend has nothing to do for ``module`` (so it is not built), or None."""
        return None

    @abstractmethod
    def build(self, context: BuildContext) -> Built:
        """Build the candidate for one graph; raise on failure (the tuner catches and reports it)."""

    def config(self) -> dict[str, Any]:
        """JSON-ready constructor arguments: ``backend_from_dict`` rebuilds the backend from them."""
        return {}

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "config": self.config()}

    def __repr__(self) -> str:
        arguments = ", ".join(f"{key}={value!r}" for key, value in self.config().items())
        return f"{type(self).__name__}({arguments})"
