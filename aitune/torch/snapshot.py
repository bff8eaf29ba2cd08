"""Independent snapshots of a call's inputs, objects included (cache objects, output dataclasses, containers).

Hugging Face ``generate`` passes one cache object to every decoder call and grows it in place: a sample
that copied only its tensors would share that object with every other sample and with the live model.
A snapshot is a deep copy with every tensor detached and cloned; each run of a sample gets a fresh
copy of it, so no run sees another's state. What cannot be copied safely (a module, which would
copy its weights; an object ``copy.deepcopy`` refuses; more than `MAX_SNAPSHOT_BYTES` of tensors)
raises `SnapshotError`, and the graph stays eager with that reason.
"""

from __future__ import annotations

import copy
import enum
import types
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from aitune.errors import TuningError

MAX_SNAPSHOT_BYTES = 1 << 30
"""The most tensor bytes one recorded call may hold; a bigger one is not snapshotted and its graph stays eager."""
MAX_WALK = 100_000
"""The most members `walk` visits in one value."""

ATOMIC = (bool, int, float, complex, str, bytes, type(None), torch.dtype, torch.device, enum.Enum)
"""Values compared by ``==`` and never looked into."""
BY_IDENTITY = (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType)
"""Values that a copy shares with the original (classes, functions): compared by identity."""


class SnapshotError(TuningError):
    """A recorded call's inputs cannot be copied safely; its graph stays eager with this sentence as the reason."""


def members(obj: Any) -> list[tuple[str, Any]] | None:
    """The named parts of a container or object, or None for a leaf (tensor, atomic value, opaque object)."""
    if isinstance(obj, (torch.Tensor, *ATOMIC, *BY_IDENTITY, nn.Module)):
        return None
    if isinstance(obj, (tuple, list)):
        return [(f"[{index}]", item) for index, item in enumerate(obj)]
    items = dict(obj) if isinstance(obj, dict) else {}
    attributes = getattr(obj, "__dict__", None)
    slots = _slots(type(obj))
    if not isinstance(obj, dict) and not isinstance(attributes, dict) and not slots:
        return None  # an opaque object: compared by ``==`` where its type defines it
    found = [(f"[{key!r}]", value) for key, value in items.items()]
    if isinstance(attributes, dict):  # an attribute mirroring a dict item (a ModelOutput field) is walked once
        found += [(f".{name}", value) for name, value in attributes.items() if name not in items]
    found += [(f".{name}", getattr(obj, name)) for name in slots if hasattr(obj, name)]
    return found


def _slots(kind: type) -> list[str]:
    names: list[str] = []
    for klass in kind.__mro__:
        slots = vars(klass).get("__slots__", ())
        names += [slots] if isinstance(slots, str) else [s for s in slots if s not in ("__dict__", "__weakref__")]
    return names


def walk(obj: Any, path: str = "") -> Iterator[tuple[str, Any, bool]]:
    """Every member of ``obj`` depth first, once each, as ``(path, value, is_leaf)``.

    `SnapshotError` past `MAX_WALK` members."""
    seen: set[int] = set()
    stack = [(path, obj)]
    count = 0
    while stack:
        where, value = stack.pop()
        count += 1
        if count > MAX_WALK:
            raise SnapshotError(f"the value at '{path or 'the inputs'}' holds more than {MAX_WALK} objects")
        parts = members(value)
        if parts is None:
            yield where, value, True
            continue
        if id(value) in seen:
            continue
        seen.add(id(value))
        yield where, value, False
        stack.extend((where + name, child) for name, child in reversed(parts))


def snapshot(value: Any, device: torch.device | None = None) -> Any:
    """A deep copy of ``value`` sharing nothing mutable with it; tensors detached and cloned (onto ``device``)."""
    memo: dict[int, Any] = {}
    total = 0
    for where, member, _ in walk(value):
        if isinstance(member, nn.Module):
            raise SnapshotError(
                f"the input at '{where or 'the inputs'}' holds a module ({type(member).__name__}), whose copy would"
                " copy its weights"
            )
        if isinstance(member, torch.Tensor) and id(member) not in memo:
            total += member.nelement() * member.element_size()
            if total > MAX_SNAPSHOT_BYTES:
                raise SnapshotError(f"the inputs hold more than {MAX_SNAPSHOT_BYTES >> 20} MiB of tensors")
            tensor = member.detach()
            memo[id(member)] = tensor.clone() if device is None else tensor.to(device, copy=True)
    try:  # deepcopy takes every tensor found above from the memo, so aliasing is kept and grad is dropped
        return copy.deepcopy(value, memo)
    except Exception as error:  # any refusal of deepcopy means the inputs cannot be snapshotted
        raise SnapshotError(f"the inputs cannot be copied ({type(error).__name__}: {str(error)[:160]})") from None
