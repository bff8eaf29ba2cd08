"""Recorded samples and graph specs: which distinct input structures a wrapped module was called with.

A graph is one input structure (`aitune.torch.graphs.structure`): the layout of ``(args, kwargs)``,
each tensor's rank and dtype, every JSON scalar's value and every other object's type. Calls of one
graph may differ in shapes only; the spec keeps the min and max size of every tensor dimension
across the recorded samples.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from aitune.errors import TuningError
from aitune.torch.graphs.structure import (
    DTYPES,
    Structure,
    encode,
    parse_structure,
    signature,
    structure_id,
)
from aitune.torch.snapshot import SnapshotError, snapshot, walk

MAX_DIM = 2**31 - 1
"""The largest dimension a saved shape may give (how much a rebuilt graph allocates is the plan's own limit)."""

__all__ = ["GraphSpec", "Sample", "SnapshotError", "check_graph", "graph_key", "parse_structure"]


@dataclass(frozen=True)
class Sample:
    """One recorded call: an independent snapshot of its positional and keyword arguments.

    A ``stateful`` sample holds objects (a cache a forward grows in place) or was seen changing its
    tensors in place: every run gets its own fresh copy (`fresh`), so every run starts from the same
    state and the snapshot never changes. Any other sample is run on the snapshot itself.
    """

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    stateful: bool = False

    @classmethod
    def capture(cls, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Sample:
        """Snapshot the call, objects included; `SnapshotError` (one sentence) when it cannot be copied safely."""
        leaves: list[Any] = []
        signature(args, kwargs, leaves)
        stateful = not all(isinstance(leaf, (torch.Tensor, bool, int, float, str, type(None))) for leaf in leaves)
        copied = snapshot((args, kwargs))
        return cls(args=copied[0], kwargs=copied[1], stateful=stateful)

    def fresh(self, always: bool = False) -> Sample:
        """A copy to run on (``self`` for a stateless sample unless ``always``)."""
        if not (self.stateful or always):
            return self
        # The snapshot was checked and its tensors detached when captured: a plain deep copy is enough.
        copied = copy.deepcopy((self.args, self.kwargs))
        return Sample(args=copied[0], kwargs=copied[1], stateful=self.stateful)

    def call(self, run: Callable[..., Any]) -> Any:
        """``run`` on a fresh copy of the sample; its output."""
        fresh = self.fresh()
        return run(*fresh.args, **fresh.kwargs)

    def observe(self, run: Callable[..., Any]) -> tuple[Any, Any]:
        """``(output, state)`` of ``run`` on a fresh copy (also of a stateless sample, so no run can change the
        snapshot): ``state`` is the copy's ``{"args", "kwargs"}`` after the call when the sample is stateful
        or the call changed an input tensor in place, None otherwise."""
        fresh = self.fresh(always=True)
        tensors = [leaf for leaf in _leaves(fresh) if isinstance(leaf, torch.Tensor)]
        versions = [tensor._version for tensor in tensors]
        output = run(*fresh.args, **fresh.kwargs)
        changed = self.stateful or [tensor._version for tensor in tensors] != versions
        return output, ({"args": fresh.args, "kwargs": fresh.kwargs} if changed else None)

    def observe_first(self, run: Callable[..., Any]) -> tuple[Sample, Any, Any]:
        """`observe` for the reference run: a forward that changes its input tensors in place marks the
        sample stateful (returned), so every later run gets a copy and is checked for the same change."""
        output, state = self.observe(run)
        return (self if state is None or self.stateful else replace(self, stateful=True)), output, state

    def to(self, device: torch.device) -> Sample:
        """The sample with its tensors (also those inside objects) on ``device``; ``self`` when already there."""
        members = walk((self.args, self.kwargs)) if self.stateful else ((None, leaf, True) for leaf in _leaves(self))
        if all(member.device == device for _, member, _ in members if isinstance(member, torch.Tensor)):
            return self
        moved = snapshot((self.args, self.kwargs), device)
        return Sample(args=moved[0], kwargs=moved[1], stateful=self.stateful)


def graph_key(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, str]:
    """``(graph id, structure JSON)`` of a call; equal for calls that differ in tensor shapes only.

    An object that is neither a tensor, a JSON scalar nor a plain tuple/list/dict is an opaque leaf: its
    type is part of the identity, its value is not (a cache object differs at every call).
    """
    quick = signature(args, kwargs, [])
    try:
        return _KNOWN_KEYS[quick]
    except KeyError:
        pass
    structure = encode(quick)
    key = structure_id(json.loads(structure)), structure
    if len(_KNOWN_KEYS) < _MAX_KNOWN_KEYS:
        _KNOWN_KEYS[quick] = key
    return key


# Every tuned or recorded call computes its key: encoding costs tens of µs, the memo lookup ~13 µs.
# A pure function's memo, bounded; its keys hold types, dtypes and scalars, never a user's object.
_KNOWN_KEYS: dict[Any, tuple[str, str]] = {}
_MAX_KNOWN_KEYS = 4096


def _leaves(sample: Sample) -> list[Any]:
    leaves: list[Any] = []
    signature(sample.args, sample.kwargs, leaves)
    return leaves


@dataclass
class GraphSpec:
    """One input structure of a module, with the shape range seen while recording.

    ``unsnapshottable`` (never saved) says why a recorded call of this graph could not be snapshotted:
    such a graph keeps no samples and stays eager.
    """

    graph_id: str
    structure: dict[str, Any]  # the JSON structure (aitune.torch.graphs.structure)
    min_shapes: list[list[int] | None]  # per leaf; None for a non-tensor leaf
    max_shapes: list[list[int] | None]
    sample_count: int = 0
    unsnapshottable: str | None = field(default=None, compare=False)

    @classmethod
    def first(cls, graph_id: str, structure: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> GraphSpec:
        shapes = _leaf_shapes(args, kwargs)
        spec = cls(graph_id, json.loads(structure), min_shapes=shapes, max_shapes=[s and list(s) for s in shapes])
        spec.sample_count = 1
        return spec

    def add(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Widen the shape range with one more call of this graph."""
        for index, shape in enumerate(_leaf_shapes(args, kwargs)):
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
        None if an input is an object, which cannot be rebuilt."""
        structure = parse_structure(self.structure)
        if structure.objects:
            return None
        values = [
            _synthetic(DTYPES[leaf.dtype], shape) if leaf.kind == "tensor" else leaf.value
            for leaf, shape in zip(structure.leaves, shapes or self.max_shapes, strict=True)
        ]
        args, kwargs = structure.rebuild(values)
        return Sample(args=args, kwargs=kwargs)

    def examples(self) -> list[Sample] | None:
        """Synthetic calls at the max shapes and, when some dimension varied, at the min shapes too, so a
        backend rebuilt from them sees which dimensions are dynamic; None if an input cannot be rebuilt."""
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
    def from_dict(cls, data: Any, where: str = "a saved graph") -> GraphSpec:
        """The spec ``to_dict`` wrote, checked by `check_graph` (`TuningError` in one sentence)."""
        check_graph(data, where)
        return cls(
            graph_id=data["graph_id"],
            structure=data["structure"],
            min_shapes=[shape and list(shape) for shape in data["min_shapes"]],
            max_shapes=[shape and list(shape) for shape in data["max_shapes"]],
            sample_count=data.get("sample_count", 0),
        )


def check_graph(data: Any, where: str = "a saved graph") -> Structure:
    """Check a saved graph: its structure parses, its id is the structure's and its shapes fit its leaves."""
    if not isinstance(data, dict) or not {"graph_id", "structure", "min_shapes", "max_shapes"} <= set(data):
        raise TuningError(
            f"{where} lacks graph_id, structure, min_shapes or max_shapes; tune again to write a new plan."
        )
    if isinstance(data["structure"], str):
        raise TuningError(
            f"{where} stores its structure in the old treespec form, which this aitune no longer reads;"
            " tune again to write a new plan."
        )
    structure = parse_structure(data["structure"], f"the structure of {where}")
    if data["graph_id"] != structure_id(data["structure"]):
        raise TuningError(f"{where} has a graph_id that is not its structure's; tune again to write a new plan.")
    for key in ("min_shapes", "max_shapes"):
        shapes = data[key]
        if not isinstance(shapes, list) or len(shapes) != len(structure.leaves):
            raise TuningError(
                f"{where} has {key} that is not one entry per input leaf; tune again to write a new plan."
            )
        for index, (leaf, shape) in enumerate(zip(structure.leaves, shapes, strict=True)):
            if not _shape_fits(leaf.rank if leaf.kind == "tensor" else None, shape):
                raise TuningError(
                    f"{where} has {key}[{index}] that does not fit its input (a list of {leaf.rank} integers from 0"
                    f" to {MAX_DIM} for a tensor, null otherwise); tune again to write a new plan."
                )
    if any(
        lo > hi
        for low, high in zip(data["min_shapes"], data["max_shapes"], strict=True)
        if low is not None
        for lo, hi in zip(low, high, strict=True)
    ):
        raise TuningError(f"{where} has a min shape above its max shape; tune again to write a new plan.")
    return structure


def _shape_fits(rank: int | None, shape: Any) -> bool:
    if rank is None:
        return shape is None
    return isinstance(shape, list) and len(shape) == rank and all(type(d) is int and 0 <= d <= MAX_DIM for d in shape)


def _synthetic(dtype: torch.dtype, shape: list[int]) -> torch.Tensor:
    return torch.randn(shape, dtype=dtype) if dtype.is_floating_point else torch.zeros(shape, dtype=dtype)


def _leaf_shapes(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[list[int] | None]:
    leaves: list[Any] = []
    signature(args, kwargs, leaves)
    return [list(leaf.shape) if isinstance(leaf, torch.Tensor) else None for leaf in leaves]
