"""Region discovery: which modules and entry methods of a model or pipeline to instrument.

Managed modules (AOT wrappers, JIT-patched modules) come from the registry. Untuned regions are
the topmost modules under ``obj`` that are not managed and hold nothing managed: discovery enters
``ModuleList``/``ModuleDict`` transparently, walks around managed descendants so their siblings
still get regions, and dedups aliases by identity (the first path wins). Below each topmost
region, its descendants become nested regions down to ``max_depth`` (containers not counted);
torch's own leaf layers (``nn.Linear``, ``nn.Conv2d``, …) are left to the operator table, where
they show anyway, since a span around each would cost more than it tells. A module the user
compiled (``torch.compile`` → ``OptimizedModule``) is one region of its own kind, never walked:
hooks inside a compiled graph are not seen, and hooks on its submodules would break the graph.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from torch import nn

from aitune.markers import COMPILED_REGION_KIND, UNTUNED_REGION_KIND, region_id, region_kind
from aitune.torch.registry import ModuleRegistry

_NN_MODULE_NAMES = frozenset(dir(nn.Module))


@dataclass(frozen=True)
class RegionTarget:
    """One module to instrument: its forward opens the region span, and so do its entry methods."""

    region: str  # e.g. "untuned_module:vae"
    kind: str  # document kind: untuned_module, compiled_module, aot_managed_module, jit_managed_module
    path: str
    module: nn.Module
    module_type: str
    methods: tuple[str, ...] = ()  # user entry methods wrapped as regions of their own
    wrapper_state: str | None = None
    parent: str | None = None  # the region of the enclosing target, for nested regions
    hook_forward: bool = True  # False for the root object: only its entry methods are regions

    def method_region(self, method: str) -> str:
        return region_id(UNTUNED_REGION_KIND, f"{self.path}.{method}" if self.path else method)


DEFAULT_MAX_DEPTH = 3
"""Deep enough for ``pipe.unet.down_blocks.0.resnets.0`` and ``model.encoder.layer.0.attention``."""


def discover_targets(obj: Any, registry: ModuleRegistry, max_depth: int = DEFAULT_MAX_DEPTH) -> list[RegionTarget]:
    """Managed regions from ``registry``, then the root's entry methods and untuned regions under ``obj``.

    ``obj=None`` instruments managed modules only; ``max_depth=1`` gives AITune's flat regions.
    """
    managed_ids = registry.managed_ids()
    targets = [_managed_target(entry) for entry in registry]
    if obj is None:
        return targets
    if is_compiled(obj) and id(obj) not in managed_ids:  # nothing inside can be walked: the whole is one region
        return [*targets, _untuned_target(type(obj._orig_mod).__name__, obj, None)]
    if isinstance(obj, nn.Module) and id(obj) not in managed_ids:
        targets += _root_methods(obj)
    return targets + discover_untuned(obj, managed_ids, max_depth)


def discover_untuned(obj: Any, managed_ids: set[int], max_depth: int = DEFAULT_MAX_DEPTH) -> list[RegionTarget]:
    """The topmost clean modules under ``obj`` with their entry methods, and their descendants as nested regions."""
    targets: list[RegionTarget] = []
    seen: set[int] = set()
    for path, module in _entry_points(obj):
        for sub_path, sub_module in _topmost_clean(module, path, managed_ids):
            if id(sub_module) in seen:
                continue
            seen.add(id(sub_module))
            top = _untuned_target(sub_path, sub_module, None, methods=tuple(user_method_names(sub_module)))
            targets.append(top)
            targets += _nested(top, max_depth - 1, seen)
    return targets


def is_compiled(module: Any) -> bool:
    """Whether ``module`` is a ``torch.compile`` wrapper (``OptimizedModule``).

    ``torch._dynamo`` is looked up, never imported: importing it costs seconds, and no module can
    have been compiled before it was imported.
    """
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    return eval_frame is not None and isinstance(module, eval_frame.OptimizedModule)


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


def _untuned_target(path: str, module: nn.Module, parent: str | None, methods: tuple[str, ...] = ()) -> RegionTarget:
    """An untuned region, or a compiled one: its forward only (what it forwards to ``_orig_mod`` runs uncompiled)."""
    kind = COMPILED_REGION_KIND if is_compiled(module) else UNTUNED_REGION_KIND
    return RegionTarget(
        region=region_id(kind, path),
        kind=kind,
        path=path,
        module=module,
        module_type=qualified_type(module._orig_mod if kind == COMPILED_REGION_KIND else module),
        methods=() if kind == COMPILED_REGION_KIND else methods,
        parent=parent,
    )


def _nested(parent: RegionTarget, depth_left: int, seen: set[int]) -> list[RegionTarget]:
    """Nested regions under ``parent`` (a clean module, so nothing below is managed; nothing below a compiled one)."""
    if depth_left <= 0 or parent.kind == COMPILED_REGION_KIND:
        return []
    found: list[RegionTarget] = []
    for path, child in _children_through_containers(parent.module, parent.path):
        if id(child) in seen or _is_torch_leaf(child):
            continue
        seen.add(id(child))
        target = _untuned_target(path, child, parent.region)
        found.append(target)
        found += _nested(target, depth_left - 1, seen)
    return found


def _children_through_containers(module: nn.Module, path: str) -> Iterator[tuple[str, nn.Module]]:
    for name, child in module.named_children():
        if is_transparent_container(child):
            yield from _children_through_containers(child, f"{path}.{name}")
        else:
            yield f"{path}.{name}", child


def _is_torch_leaf(module: nn.Module) -> bool:
    return type(module).__module__.startswith("torch.") and next(module.children(), None) is None


def _root_methods(obj: nn.Module) -> list[RegionTarget]:
    """The root module's entry methods (``model.generate``): their glue is their self time, not residual."""
    methods = tuple(user_method_names(obj))
    if not methods:
        return []
    return [
        RegionTarget(
            region=region_id(UNTUNED_REGION_KIND, "(root)"),
            kind=UNTUNED_REGION_KIND,
            path="",
            module=obj,
            module_type=qualified_type(obj),
            methods=methods,
            hook_forward=False,
        )
    ]


def _managed_target(entry: Any) -> RegionTarget:
    return RegionTarget(
        region=entry.region,
        kind=region_kind(entry.kind).document_kind,
        path=entry.name,
        module=entry.hook_target,
        module_type=qualified_type(entry.underlying),
        wrapper_state=entry.state,
    )
