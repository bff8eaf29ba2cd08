"""The module registry: which modules aitune manages (AOT wrappers, JIT-patched modules) and how to see them.

Profiling reads it to attribute managed modules as ``aot_module:<name>`` / ``jit_module:<name>``
regions and to keep untuned discovery out of their subtrees. Entries are held weakly so that a
wrapper the user drops leaves the registry with it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from torch import nn

from aitune.markers import AOT_REGION_KIND, JIT_REGION_KIND, region_id


@dataclass(frozen=True)
class ManagedModule:
    """One managed module as the profiler sees it."""

    kind: str  # AOT_REGION_KIND or JIT_REGION_KIND
    name: str
    hook_target: nn.Module  # what hooks are registered on (an AOT wrapper proxy forwards to its module)
    underlying: nn.Module  # the user's module, whose subtree untuned discovery must skip
    state: str

    @property
    def region(self) -> str:
        return region_id(self.kind, self.name)


class ModuleRegistry:
    """Managed modules by region id; each registers a callable describing its current state."""

    def __init__(self) -> None:
        self._describers: dict[str, weakref.WeakMethod | Callable[[], ManagedModule | None]] = {}

    def register(self, kind: str, name: str, describe: Callable[[], ManagedModule | None]) -> str:
        """Add a managed module; ``describe`` is a bound method of the manager, held weakly."""
        assert kind in (AOT_REGION_KIND, JIT_REGION_KIND), kind
        region = region_id(kind, name)
        holder = weakref.WeakMethod(describe) if hasattr(describe, "__self__") else describe
        self._describers[region] = holder  # type: ignore[assignment]
        return region

    def unregister(self, region: str) -> None:
        self._describers.pop(region, None)

    def __contains__(self, region: object) -> bool:
        return any(entry.region == region for entry in self)

    def __iter__(self) -> Iterator[ManagedModule]:
        for region, holder in list(self._describers.items()):
            describe = holder() if isinstance(holder, weakref.WeakMethod) else holder
            entry = describe() if describe is not None else None
            if entry is None:
                self._describers.pop(region, None)
                continue
            yield entry

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def managed_ids(self) -> set[int]:
        """``id()`` of every managed module, its wrapper and every module in its subtree."""
        ids: set[int] = set()
        for entry in self:
            ids.add(id(entry.hook_target))
            ids.update(id(module) for module in entry.underlying.modules())
        return ids


MODULE_REGISTRY = ModuleRegistry()
"""The process-wide registry that wrappers join by default (AITune's ``MODULE_REGISTRY``)."""
