"""Reduced-precision backends: a copy of the module with its weights cast once (bf16) or its linear layers
quantized once (int8 dynamic), judged on the task (`aitune.torch.tuning.task_gate`), never per module.

Casting once is the point: eager ``autocast`` re-casts every weight on every call (measured up to 3×
slower than fp32 on this project's machines). The original module stays as it is, in fp32: it is what
the verification switches back to and what a failed candidate falls back on; the copy costs its own
weight bytes (``build_details.weight_bytes``: the original's and the copy's).

Each backend names its ``precision``; a trial offers it only when the tuning runs at that precision
(`aitune.torch.tuning.trial.Trial.not_offered`), so the default fp32 never runs one of them.
"""

from __future__ import annotations

import copy
import types
import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch import nn

from aitune.cpuinfo import cpu_flags
from aitune.suggest.precision import int8_dot_products
from aitune.torch.backends.base import Backend, BackendError, BuildContext, Built
from aitune.torch.backends.inductor import InductorBackend
from aitune.torch.precision import precision_unavailable


class Bf16Backend(Backend):
    """A bfloat16 copy of the module: float32 inputs cast to bfloat16 at its boundary, bfloat16 outputs cast back;
    with ``compile``, the copy's forward is compiled by Inductor with freezing (the weights folded in)."""

    name = "bf16"
    precision = "bf16"

    def __init__(self, compile: bool = False) -> None:
        self.compile = compile

    def config(self) -> dict[str, Any]:
        return {"compile": self.compile}

    def unavailable_reason(self, device: torch.device) -> str | None:
        return precision_unavailable("bf16", device)

    def build(self, context: BuildContext) -> Built:
        module = module_copy(context)
        before = weight_bytes(context.module)
        module.to(torch.bfloat16)
        forward = _bound_forward(context, module)

        def run(*args: Any, **kwargs: Any) -> Any:
            args, kwargs = pytree.tree_map(_to_bf16, (args, kwargs))
            return pytree.tree_map(_to_fp32, forward(*args, **kwargs))

        details = {"precision": "bf16", "weight_bytes": {"original": before, "tuned": weight_bytes(module)}}
        if not self.compile:
            return Built(run=run, details=details)
        built = InductorBackend(freezing=True).build(replace(context, forward=run))
        return Built(run=built.run, release=built.release, details={**built.details, **details})


class Int8DynamicBackend(Backend):
    """A copy of the module with every ``nn.Linear`` (and transformers' ``Conv1D``, converted to one) quantized
    to int8 weights by ``torch.ao.quantization.quantize_dynamic``; activations are quantized per call."""

    name = "int8_dynamic"
    precision = "int8"

    def unavailable_reason(self, device: torch.device) -> str | None:
        return precision_unavailable("int8", device)

    def unsuited_reason(self, module: nn.Module) -> str | None:
        return nothing_to_quantize(module)

    def build(self, context: BuildContext) -> Built:
        unsuited = nothing_to_quantize(context.module)
        if unsuited is not None:
            raise BackendError(unsuited)
        before = weight_bytes(context.module)
        copied = module_copy(context)
        holder = nn.ModuleDict({"module": copied})  # quantize_dynamic swaps children: the module itself may be a Linear
        converted = _conv1d_to_linear(holder)
        linears = [child for child in holder.modules() if isinstance(child, nn.Linear)]
        with warnings.catch_warnings():  # torch.ao's deprecation notices, once per build, say nothing about this model
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", UserWarning)
            torch.ao.quantization.quantize_dynamic(holder, {nn.Linear}, dtype=torch.qint8, inplace=True)
        module = holder["module"]
        # A module swapped whole (a Linear) runs its new class's forward; otherwise the original forward, on the copy.
        forward = _bound_forward(context, module) if module is copied else module.forward
        details = {
            "precision": "int8",
            "weight_bytes": {"original": before, "tuned": weight_bytes(module)},
            "conv1d_converted": converted,
            "linear_layers": len(linears),
            "largest_linear": _largest(linears),
            # what the reason of a lost int8 candidate names: small layers, or no one-step int8 dot product
            "int8_dot_products": int8_dot_products(cpu_flags()),
        }
        return Built(run=forward, details=details)


def nothing_to_quantize(module: nn.Module) -> str | None:
    """Why dynamic int8 has nothing to convert in ``module`` (no ``nn.Linear``, no ``Conv1D``), or None."""
    layers = list(module.modules())
    if any(isinstance(layer, nn.Linear) or _is_conv1d(layer) for layer in layers):
        return None
    convolutions = sum(isinstance(layer, nn.modules.conv._ConvNd) for layer in layers)
    kept = f"; its {convolutions} convolution(s) stay fp32" if convolutions else ""
    return f"no linear layer to quantize (dynamic int8 converts nn.Linear layers only{kept})"


def _largest(linears: list[nn.Linear]) -> str:
    """``in x out`` of the largest linear layer: dynamic int8 pays on large layers only (docs/tuning.md)."""
    layer = max(linears, key=lambda linear: linear.in_features * linear.out_features)
    return f"{layer.in_features}x{layer.out_features}"


def module_copy(context: BuildContext) -> nn.Module:
    """A deep copy of ``context.module`` for a reduced precision to change, without the wrapper's dispatching
    ``forward`` (an instance attribute the wrapper installs; the copy gets the original forward instead)."""
    if getattr(context.forward, "__self__", None) is not context.module:
        raise BackendError("its forward is not a method of the module, so no copy of the module can run it")
    module = context.module
    installed = module.__dict__.get("forward")
    memo: dict[int, Any] = {id(installed): None} if installed is not None else {}
    with torch.no_grad():
        duplicate = copy.deepcopy(module, memo)
    duplicate.__dict__.pop("forward", None)
    return duplicate.eval() if not module.training else duplicate


def weight_bytes(module: nn.Module) -> int:
    """Bytes of the module's state (parameters and buffers, quantized packed weights included)."""
    return sum(_bytes(value) for value in module.state_dict().values())


def _bytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, tuple | list):
        return sum(_bytes(item) for item in value)
    return 0


def _bound_forward(context: BuildContext, module: nn.Module) -> Callable[..., Any]:
    return types.MethodType(context.forward.__func__, module)


def _to_bf16(leaf: Any) -> Any:
    return leaf.to(torch.bfloat16) if isinstance(leaf, torch.Tensor) and leaf.dtype == torch.float32 else leaf


def _to_fp32(leaf: Any) -> Any:
    return leaf.to(torch.float32) if isinstance(leaf, torch.Tensor) and leaf.dtype == torch.bfloat16 else leaf


def _conv1d_to_linear(module: nn.Module) -> int:
    """Replace transformers' ``Conv1D`` (GPT-2's linear layers, weight stored in × out) by an equal ``nn.Linear``
    in place; returns how many were replaced. Recognised by its name and shape, so transformers need not be imported."""
    replaced = 0
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if not _is_conv1d(child):
                continue
            weight = child.weight
            bias = getattr(child, "bias", None)
            linear = nn.Linear(weight.shape[0], weight.shape[1], bias=bias is not None)
            with torch.no_grad():
                linear.weight.copy_(weight.t())
                if bias is not None:
                    linear.bias.copy_(bias)
            setattr(parent, name, linear)
            replaced += 1
    return replaced


def _is_conv1d(layer: nn.Module) -> bool:
    weight = getattr(layer, "weight", None)
    return type(layer).__name__ == "Conv1D" and isinstance(weight, torch.Tensor) and weight.dim() == 2
