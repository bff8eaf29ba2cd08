"""Region discovery: which modules and entry methods of a model or pipeline to instrument.

Managed modules (AOT wrappers, JIT-patched modules) come from the registry. Untuned regions are
the topmost modules under ``obj`` that are not managed and hold nothing managed: discovery enters
``ModuleList``/``ModuleDict`` transparently, walks around managed descendants so their siblings
still get regions, and dedups aliases by identity (the first path wins).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from aitune.markers import UNTUNED_REGION_KIND, region_id
from aitune.torch.registry import ModuleRegistry

_NN_MODULE_NAMES = frozenset(dir(nn.Module))


@dataclass(frozen=True)
class RegionTarget:
    """One module to instrument: its forward opens the region span, and so do its entry methods."""

    region: str  # e.g. "untuned_module:vae"
    kind: str  # document kind: untuned_module, aot_managed_module, jit_managed_module
    path: str
    module: nn.Module
    module_type: str
    methods: tuple[str, ...] = ()  # user entry methods wrapped as regions of their own
    wrapper_state: str | None = None
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    def method_region(self, method: str) -> str:
        return region_id(UNTUNED_REGION_KIND, f"{self.path}.{method}")


def discover_targets(obj: Any, registry: ModuleRegistry) -> list[RegionTarget]:
    """Managed regions from ``registry`` then untuned regions under ``obj`` (None: managed only)."""
    managed = [_managed_target(entry) for entry in registry]
    untuned = discover_untuned(obj, registry.managed_ids()) if obj is not None else []
    return managed + untuned


def discover_untuned(obj: Any, managed_ids: set[int]) -> list[RegionTarget]:
    """The topmost clean modules under ``obj``, each with its user-defined entry methods."""
    targets: list[RegionTarget] = []
    seen: set[int] = set()
    for path, module in _entry_points(obj):
        for sub_path, sub_module in _topmost_clean(module, path, managed_ids):
            if id(sub_module) in seen:
                continue
            seen.add(id(sub_module))
            targets.append(
                RegionTarget(
                    region=region_id(UNTUNED_REGION_KIND, sub_path),
                    kind="untuned_module",
                    path=sub_path,
                    module=sub_module,
                    module_type=qualified_type(sub_module),
                    methods=tuple(user_method_names(sub_module)),
                )
            )
    return targets


def qualified_type(obj: Any) -> str:
    """``module.QualName`` of an object's type, e.g. ``torch.nn.modules.linear.Linear``."""
    kind = type(obj)
    return f"{kind.__module__}.{kind.__qualname__}"


def user_method_names(module: nn.Module) -> list[str]:
    """Public plain methods of the module's class hierarchy (mixins included) beyond ``nn.Module``'s.

    ``inspect.getattr_static`` keeps properties from firing; classmethods, staticmethods and other
    descriptors are left alone.
    """
    names = []
    for name in dir(type(module)):
        if name.startswith("_") or name in _NN_MODULE_NAMES:
            continue
        if inspect.isfunction(inspect.getattr_static(type(module), name, None)):
            names.append(name)
    return names


def is_transparent_container(module: nn.Module) -> bool:
    """ModuleList and ModuleDict are iterated by their owners, never called, so hooks on them never fire."""
    return isinstance(module, (nn.ModuleList, nn.ModuleDict))


def _entry_points(obj: Any) -> Iterator[tuple[str, nn.Module]]:
    if isinstance(obj, nn.Module):
        yield from obj.named_children()
        return
    for name, value in vars(obj).items() if hasattr(obj, "__dict__") else ():
        if isinstance(value, nn.Module) and not name.startswith("_"):
            yield name, value


def _topmost_clean(module: nn.Module, path: str, managed_ids: set[int]) -> Iterator[tuple[str, nn.Module]]:
    if id(module) in managed_ids:  # managed itself, or inside a managed subtree: its wrapper owns the time
        return
    if is_transparent_container(module) or any(id(sub) in managed_ids for sub in module.modules()):
        for name, child in module.named_children():
            yield from _topmost_clean(child, f"{path}.{name}", managed_ids)
        return
    yield path, module


def _managed_target(entry: Any) -> RegionTarget:
    kind = "aot_managed_module" if entry.kind == "aot_module" else "jit_managed_module"
    return RegionTarget(
        region=entry.region,
        kind=kind,
        path=entry.name,
        module=entry.hook_target,
        module_type=qualified_type(entry.underlying),
        wrapper_state=entry.state,
    )
