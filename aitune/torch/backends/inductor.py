"""``torch.compile`` with Inductor, frozen for inference.

Two facts measured on torch 2.13 shape this file. ``options={"freezing": True}`` is silently ignored;
freezing only takes effect with ``torch._inductor.config.freezing`` set around the first call, so the
build compiles every recorded shape under that setting. And dynamo caches compiled code per code
object: frozen instances of one class recompile each other's entry and from the 9th fall back to
eager with only a warning. Each build therefore compiles a function with a code object of its own.

The generated C++ runs ``cpp.threads`` OpenMP threads, fixed at build: the build sets it to torch's
count explicitly (`aitune.torch.backends.threads`) and writes its code into aitune's private cache
folder (`aitune.torch.backends.inductor_cache`), never torch's shared ``/tmp`` default.
"""

from __future__ import annotations

import shutil
import types
from collections.abc import Callable
from typing import Any

import torch
import torch._dynamo
import torch._inductor.config
import torch.utils._pytree as pytree

from aitune.torch.backends.base import Backend, BackendError, BuildContext, Built
from aitune.torch.backends.inductor_cache import inductor_cache, private_cache_dir
from aitune.torch.backends.threads import torch_threads


class InductorBackend(Backend):
    """``torch.compile(backend="inductor")`` of the module's forward; ``freezing`` folds weights into the code."""

    name = "inductor"

    def __init__(self, mode: str | None = None, freezing: bool = True, dynamic: bool | None = None) -> None:
        self.mode = mode
        self.freezing = freezing
        self.dynamic = dynamic

    def config(self) -> dict[str, Any]:
        return {"mode": self.mode, "freezing": self.freezing, "dynamic": self.dynamic}

    def unavailable_reason(self, device: torch.device) -> str | None:
        if self.mode in CUDA_GRAPH_MODES and device.type != "cuda":
            return f"CUDA graphs (mode {self.mode!r}) replay on a CUDA device only"
        if device.type == "cpu" and not (shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")):
            return "Inductor on CPU needs a C++ compiler (g++ or clang++) on PATH"
        return None

    def build(self, context: BuildContext) -> Built:
        graphs_before = _compiled_graphs()
        threads = torch_threads().intra_op
        folder, refused = private_cache_dir()
        patch = torch._inductor.config.patch(freezing=self.freezing, **{"cpp.threads": threads})
        with torch.no_grad(), patch, inductor_cache(folder):
            # torch.compile itself reads the cache folder (its bisector's status file): inside, too.
            compiled = torch.compile(
                own_code(context.forward), backend="inductor", mode=self.mode, dynamic=self.dynamic
            )
            for sample in context.samples:  # compile every recorded shape now, not at the user's first call
                compiled(*sample.args, **sample.kwargs)
        if _compiled_graphs() == graphs_before:
            raise BackendError("torch.compile produced no graph for this module; it would run eager")
        details = {"graphs": _compiled_graphs() - graphs_before, "threads": threads}
        if refused is not None:
            details["cache_note"] = f"{refused}; built in a private temporary folder instead"
        if self.mode in CUDA_GRAPH_MODES and context.device.type == "cuda":
            return Built(run=owned_outputs(compiled), details=details)
        return Built(run=compiled, details=details)


CUDA_GRAPH_MODES = frozenset({"reduce-overhead", "max-autotune"})
"""``torch.compile`` modes that replay CUDA graphs on a CUDA device."""


def owned_outputs(compiled: Callable[..., Any]) -> Callable[..., Any]:
    """``compiled`` returning tensors of the caller's own, as eager does.

    A CUDA graph writes each call's outputs into buffers that its next call reuses, so an output kept
    across calls (the gate comparing samples, a loop collecting each step's logits) would be overwritten
    or refused. Each call starts a new step and its output tensors are copied out: one device copy each.
    """

    def run(*args: Any, **kwargs: Any) -> Any:
        torch.compiler.cudagraph_mark_step_begin()
        return pytree.tree_map_only(torch.Tensor, torch.clone, compiled(*args, **kwargs))

    return run


def own_code(forward: Callable[..., Any]) -> Callable[..., Any]:
    """A function calling ``forward`` whose code object belongs to it alone, so dynamo's cache is per build."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return forward(*args, **kwargs)

    return types.FunctionType(
        call.__code__.replace(), call.__globals__, "aitune_compiled_forward", None, call.__closure__
    )


def _compiled_graphs() -> int:
    return torch._dynamo.utils.counters["stats"]["unique_graphs"]
