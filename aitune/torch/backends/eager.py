"""Eager: the module's own forward. The reference every candidate is checked and timed against."""

from __future__ import annotations

from typing import Any

import torch
import torch.utils._pytree as pytree

from aitune.torch.backends.base import Backend, BuildContext, Built


class EagerBackend(Backend):
    """Runs the original forward unchanged."""

    name = "eager"

    def build(self, context: BuildContext) -> Built:
        return Built(run=context.forward)


class AutocastBackend(Backend):
    """The original forward under ``torch.autocast`` in a reduced precision; outputs cast back to the reference dtypes.

    Offered only when the correctness gate's tolerance admits the precision's resolution.
    """

    name = "autocast"

    def __init__(self, dtype: str = "bfloat16") -> None:
        self.dtype = dtype
        self.reduced_precision = getattr(torch, dtype)

    def config(self) -> dict[str, Any]:
        return {"dtype": self.dtype}

    def build(self, context: BuildContext) -> Built:
        forward, device_type, precision = context.forward, context.device.type, self.reduced_precision
        reference_dtypes = [
            leaf.dtype if isinstance(leaf, torch.Tensor) else None
            for leaf in pytree.tree_leaves(context.reference_outputs[0])
        ]

        def run(*args: Any, **kwargs: Any) -> Any:
            with torch.autocast(device_type, dtype=precision):
                outputs = forward(*args, **kwargs)
            leaves, spec = pytree.tree_flatten(outputs)
            cast = [_cast_like(leaf, dtype) for leaf, dtype in zip(leaves, reference_dtypes, strict=True)]
            return pytree.tree_unflatten(cast, spec)

        return Built(run=run)


def _cast_like(leaf: Any, dtype: torch.dtype | None) -> Any:
    return leaf.to(dtype) if isinstance(leaf, torch.Tensor) and dtype is not None and leaf.dtype != dtype else leaf
