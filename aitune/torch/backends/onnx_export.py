"""Export one graph of a module to ONNX with torch's dynamo exporter, tensors in and tensors out.

The legacy TorchScript exporter failed on GPT-2 (``aten::diff`` at opset 17); the dynamo exporter
worked, so it is the only one used. Inputs are the call's tensor leaves in pytree order (non-tensor
values are baked in, as they are part of the graph's identity); outputs are the flattened tensors.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch import nn

from aitune.torch.backends.base import BackendError, BuildContext


class _FlatForward(nn.Module):
    """Calls the module's forward from a flat list of tensors, rebuilding the non-tensor values."""

    def __init__(
        self, module: nn.Module, forward: Callable[..., Any], leaves: list[Any], spec: pytree.TreeSpec
    ) -> None:
        super().__init__()
        self.inner = module  # a child, so the exporter sees the weights as parameters
        self._forward = forward
        self._leaves = leaves
        self._spec = spec
        self.train(module.training)

    def forward(self, *tensors: torch.Tensor) -> list[torch.Tensor]:
        it = iter(tensors)
        leaves = [next(it) if isinstance(leaf, torch.Tensor) else leaf for leaf in self._leaves]
        args, kwargs = pytree.tree_unflatten(leaves, self._spec)
        return pytree.tree_leaves(self._forward(*args, **kwargs))


def tensor_inputs(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """The call's tensors in the order the exported graph takes them."""
    return [leaf for leaf in pytree.tree_leaves((args, kwargs)) if isinstance(leaf, torch.Tensor)]


def output_spec(reference: Any) -> pytree.TreeSpec:
    """The structure to rebuild outputs into; only tensors can come out of an exported graph."""
    leaves, spec = pytree.tree_flatten(reference)
    if not all(isinstance(leaf, torch.Tensor) for leaf in leaves):
        kinds = sorted({type(leaf).__name__ for leaf in leaves if not isinstance(leaf, torch.Tensor)})
        raise BackendError(f"the module returns non-tensor values ({', '.join(kinds)}), which ONNX cannot return")
    return spec


def shape_ranges(context: BuildContext) -> list[tuple[list[int], list[int]]]:
    """Per tensor input, the (min, max) shape across the recorded samples."""
    shapes = [[list(t.shape) for t in tensor_inputs(s.args, s.kwargs)] for s in context.samples]
    return [
        ([min(dims) for dims in zip(*per_input, strict=True)], [max(dims) for dims in zip(*per_input, strict=True)])
        for per_input in zip(*shapes, strict=True)
    ]


HAND_BUILT_IR_VERSION = 8
"""The IR version of the small ONNX graphs aitune builds by hand (opsets up to 17): every supported ONNX
Runtime reads it, while ``onnx.helper.make_model`` stamps its own library's newest, which an older ONNX
Runtime refuses (onnx 1.23 writes IR 14; ONNX Runtime 1.30 reads up to 13, seen on the GPU image)."""


def hand_built_model(graph: Any, opset: int) -> Any:
    """An ONNX model of ``graph`` (built with ``onnx.helper``) at ``opset``, at `HAND_BUILT_IR_VERSION` or lower."""
    from onnx import helper

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, HAND_BUILT_IR_VERSION)
    return model


def export_onnx(context: BuildContext, directory: Path) -> Path:
    """Write ``model.onnx`` (weights alongside when large) for the first sample's graph; returns its path."""
    first = context.samples[0]
    leaves, spec = pytree.tree_flatten((first.args, first.kwargs))
    flat = _FlatForward(context.module, context.forward, leaves, spec)
    tensors = tuple(tensor_inputs(first.args, first.kwargs))
    dynamic = context.dynamic_shapes if context.dynamic_shapes is not None else _varying_dims(context)
    path = directory / "model.onnx"
    with torch.no_grad(), _quiet_exporter():
        program = torch.onnx.export(flat, tensors, dynamo=True, dynamic_shapes=dynamic, verbose=False)
        program.save(str(path))
    return path


def _varying_dims(context: BuildContext) -> tuple[tuple[dict[int, Any] | None, ...]] | None:
    ranges = shape_ranges(context)
    dims = [
        {d: torch.export.Dim.DYNAMIC for d, (lo, hi) in enumerate(zip(*r, strict=True)) if lo != hi} or None
        for r in ranges
    ]
    return (tuple(dims),) if any(dims) else None  # one entry: forward's *tensors is a single tuple argument


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    """The exporter prints progress and registry warnings on every export, and onnxscript's optimizer a
    warning for each constant it cannot fold ("Evaluation failed: …", harmless: the node stays in the
    graph); keep tuning output readable."""
    loggers = [logging.getLogger(name) for name in QUIET_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


QUIET_LOGGERS = ("torch.onnx", "onnxscript")
"""Loggers held at errors only while a module is exported (`_quiet_exporter`)."""
