"""Recorded samples and graph specs: which distinct input structures a wrapped module was called with.

A graph is one input structure: the pytree layout of ``(args, kwargs)``, each tensor's rank and dtype,
and every non-tensor value. Calls of one graph may differ in shapes only; the spec keeps the min and
max size of every tensor dimension across the recorded samples.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree

_JSON_SCALARS = (bool, int, float, str, type(None))


@dataclass(frozen=True)
class Sample:
    """One recorded call: detached copies of its positional and keyword arguments."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    @classmethod
    def capture(cls, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Sample:
        """Copy the call's tensors so later in-place edits by the caller cannot change the sample."""
        copy = pytree.tree_map_only(torch.Tensor, lambda t: t.detach().clone(), (args, kwargs))
        return cls(args=copy[0], kwargs=copy[1])

    def to(self, device: torch.device) -> Sample:
        moved = pytree.tree_map_only(torch.Tensor, lambda t: t.to(device), (self.args, self.kwargs))
        return Sample(args=moved[0], kwargs=moved[1])


def leaf_descriptor(leaf: Any) -> list[Any]:
    """A tensor's ``["tensor", dtype, rank]``, or a non-tensor's ``["value", JSON value or repr]``."""
    if isinstance(leaf, torch.Tensor):
        return ["tensor", str(leaf.dtype).removeprefix("torch."), leaf.dim()]
    return ["value", leaf if isinstance(leaf, _JSON_SCALARS) else repr(leaf)]


def graph_key(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, str]:
    """``(graph id, structure JSON)`` of a call; equal for calls that differ in tensor shapes only."""
    leaves, spec = pytree.tree_flatten((args, kwargs))
    quick = (spec, tuple(_quick_descriptor(leaf) for leaf in leaves))
    try:
        return _KNOWN_KEYS[quick]
    except KeyError:
        pass
    except TypeError:  # an unhashable non-tensor value: no memo for this call
        return _structure_key(leaves, spec)
    key = _structure_key(leaves, spec)
    if len(_KNOWN_KEYS) < _MAX_KNOWN_KEYS:
        _KNOWN_KEYS[quick] = key
    return key


# Every tuned or recorded call computes its key: serialising the treespec costs ~65 µs, the memo
# lookup ~13 µs. A pure function's memo, bounded, so it holds no state a caller could observe.
_KNOWN_KEYS: dict[Any, tuple[str, str]] = {}
_MAX_KNOWN_KEYS = 4096


def _quick_descriptor(leaf: Any) -> tuple[Any, ...]:
    return (leaf.dtype, leaf.dim()) if isinstance(leaf, torch.Tensor) else (type(leaf), leaf)


def _structure_key(leaves: list[Any], spec: pytree.TreeSpec) -> tuple[str, str]:
    structure = json.dumps([pytree.treespec_dumps(spec), [leaf_descriptor(leaf) for leaf in leaves]])
    return hashlib.sha1(structure.encode()).hexdigest()[:12], structure


@dataclass
class GraphSpec:
    """One input structure of a module, with the shape range seen while recording."""

    graph_id: str
    structure: str  # JSON: [treespec, leaf descriptors]
    min_shapes: list[list[int] | None]  # per leaf; None for a non-tensor leaf
    max_shapes: list[list[int] | None]
    sample_count: int = 0

    @classmethod
    def first(cls, graph_id: str, structure: str, sample: Sample) -> GraphSpec:
        shapes = _leaf_shapes(sample)
        return cls(graph_id, structure, min_shapes=shapes, max_shapes=[s and list(s) for s in shapes], sample_count=1)

    def add(self, sample: Sample) -> None:
        """Widen the shape range with one more sample of this graph."""
        for index, shape in enumerate(_leaf_shapes(sample)):
            if shape is not None:
                self.min_shapes[index] = [min(a, b) for a, b in zip(self.min_shapes[index], shape, strict=True)]
                self.max_shapes[index] = [max(a, b) for a, b in zip(self.max_shapes[index], shape, strict=True)]
        self.sample_count += 1

    def dynamic_dims(self) -> list[list[int]]:
        """Per leaf, the dimensions whose size varied across samples."""
        return [
            [d for d, (lo, hi) in enumerate(zip(low, high, strict=True)) if lo != hi] if low is not None else []
            for low, high in zip(self.min_shapes, self.max_shapes, strict=True)
        ]

    def example(self, shapes: list[list[int] | None] | None = None) -> Sample | None:
        """A synthetic call at ``shapes`` (default: the max shapes) with random floats and zero integers;
        None if a value cannot be rebuilt."""
        treespec, descriptors = json.loads(self.structure)
        leaves = []
        for (kind, *detail), shape in zip(descriptors, shapes or self.max_shapes, strict=True):
            if kind == "value":
                if not isinstance(detail[0], _JSON_SCALARS):
                    return None
                leaves.append(detail[0])
                continue
            dtype = getattr(torch, detail[0])
            leaves.append(
                torch.randn(shape, dtype=dtype) if dtype.is_floating_point else torch.zeros(shape, dtype=dtype)
            )
        args, kwargs = pytree.tree_unflatten(leaves, pytree.treespec_loads(treespec))
        return Sample(args=tuple(args), kwargs=dict(kwargs))

    def examples(self) -> list[Sample] | None:
        """Synthetic calls at the max shapes and, when some dimension varied, at the min shapes too, so a
        backend rebuilt from them sees which dimensions are dynamic; None if a value cannot be rebuilt."""
        shapes = [self.max_shapes] + ([self.min_shapes] if self.min_shapes != self.max_shapes else [])
        made = [self.example(each) for each in shapes]
        return None if any(sample is None for sample in made) else made  # type: ignore[return-value]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; ``from_dict`` reads it back."""
        return {
            "graph_id": self.graph_id,
            "structure": self.structure,
            "min_shapes": self.min_shapes,
            "max_shapes": self.max_shapes,
            "sample_count": self.sample_count,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GraphSpec:
        return cls(
            graph_id=data["graph_id"],
            structure=data["structure"],
            min_shapes=data["min_shapes"],
            max_shapes=data["max_shapes"],
            sample_count=data.get("sample_count", 0),
        )


def _leaf_shapes(sample: Sample) -> list[list[int] | None]:
    leaves = pytree.tree_leaves((sample.args, sample.kwargs))
    return [list(leaf.shape) if isinstance(leaf, torch.Tensor) else None for leaf in leaves]
