"""Wrap modules of a model or pipeline by dotted path, writing the wrappers back into their parents.

Paths are the ones profiles use: ``unet``, ``unet.blocks.0`` (a ``ModuleList``/``Sequential`` index),
``heads.text`` (a ``ModuleDict`` key), ``3`` (a child of an ``nn.Sequential`` tuned itself), also through plain
objects, lists and dicts of a pipeline; each is checked by the one rule, `aitune.markers.is_module_path`. The
empty path (`WHOLE`) is ``obj`` itself, a model tuned whole: its wrapper patches ``obj.forward`` in
place, so ``obj`` stays the object its callers hold and its own methods (``generate``) reach the wrapper.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, MutableMapping, MutableSequence
from typing import Any

from torch import nn

from aitune.errors import TuningError
from aitune.markers import is_module_path
from aitune.torch.tuning.wrapper import Module

WHOLE = ""
"""The path of the object itself."""


def wrap(obj: Any, paths: str | Iterable[str], **options: Any) -> dict[str, Module]:
    """Wrap each module at ``paths`` under ``obj`` in an ``aitune.torch.Module`` named by its path.

    ``options`` go to every ``Module`` (strategy, strategies, dynamic_shapes, registry). If one path
    fails, the wrappers already made are closed and their modules put back.
    """
    return replace_modules(
        obj,
        [paths] if isinstance(paths, str) else list(paths),
        lambda path, module: Module(module, name=path or None, **options),
    )


def replace_modules(obj: Any, paths: Iterable[str], make: Callable[[str, nn.Module], Module]) -> dict[str, Module]:
    """Put ``make(path, module)`` in place of the module at each path, all or nothing.

    If one path fails (nothing there, not a module, already wrapped, ``make`` raised), the wrappers
    already made are closed and their modules put back before the error propagates.
    """
    done: dict[str, Module] = {}
    try:
        for path in paths:
            module = module_at(obj, path)
            if not isinstance(module, nn.Module) or isinstance(module, Module) or _in_place_wrapper(module):
                kind = "already an aitune.torch.Module" if isinstance(module, nn.Module) else type(module).__name__
                raise TuningError(f"'{path}' is {kind}, not a module to wrap; pass the path of an nn.Module.")
            done[path] = make(path, module)
            if path != WHOLE:
                _set(*_parent_and_key(obj, path), done[path])
    except BaseException:
        unwrap(obj, done)
        raise
    return done


def module_at(obj: Any, path: str) -> Any:
    """What sits at the dotted ``path`` under ``obj`` (``obj`` for `WHOLE`); `TuningError` naming the missing part."""
    if path == WHOLE:
        return obj
    parent, key = _parent_and_key(obj, path)
    return _get(parent, key, path)


def unwrap(obj: Any, paths: str | Iterable[str]) -> None:
    """Close the wrappers at ``paths`` and put the original modules back into their parents."""
    for path in [paths] if isinstance(paths, str) else list(paths):
        if path == WHOLE:
            wrapper = _in_place_wrapper(obj)
            if wrapper is not None:
                wrapper.close()
            continue
        parent, key = _parent_and_key(obj, path)
        wrapper = _get(parent, key, path)
        if isinstance(wrapper, Module):
            _set(parent, key, wrapper.close())


def _in_place_wrapper(module: Any) -> Module | None:
    """The ``aitune.torch.Module`` whose dispatch is ``module``'s forward, if one wraps it."""
    owner = getattr(getattr(module, "forward", None), "__self__", None)
    return owner if isinstance(owner, Module) else None


def _parent_and_key(obj: Any, path: str) -> tuple[Any, str]:
    if not is_module_path(path):
        raise TuningError(
            f"{path[:80]!r} is not a module path; write it as the profile does: dotted names and "
            "indices, e.g. 'unet.blocks.0' or '3'."
        )
    *parents, key = path.split(".")
    parent = obj
    for depth, part in enumerate(parents):
        parent = _get(parent, part, ".".join(parents[: depth + 1]))
    return parent, key


def _get(parent: Any, key: str, path: str) -> Any:
    try:
        if isinstance(parent, (nn.ModuleList, nn.Sequential, MutableSequence)) and key.isdigit():
            return parent[int(key)]
        if isinstance(parent, (nn.ModuleDict, Mapping)):
            return parent[key]
        return getattr(parent, key)
    except (AttributeError, IndexError, KeyError):
        raise TuningError(f"nothing at '{path}' ({type(parent).__name__} has no '{key}'); check the path.") from None


def _set(parent: Any, key: str, value: Any) -> None:
    if isinstance(parent, (nn.ModuleList, nn.Sequential, MutableSequence)) and key.isdigit():
        parent[int(key)] = value
    elif isinstance(parent, (nn.ModuleDict, MutableMapping)):
        parent[key] = value
    else:
        setattr(parent, key, value)
