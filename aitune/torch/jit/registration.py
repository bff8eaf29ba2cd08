"""Explicit registration: JIT tuning for modules that already exist (built before aitune was imported).

Only the registered modules are patched, each found its place on its first call like an
intercepted one. A target inside another target is its fallback: it tunes only if the outer one
fails, and is detached when the outer one tunes (the outer backend runs its code). Targets that
share submodules without containing each other tune independently. A target inside or around an
``aitune.torch.Module`` is rejected: the AOT wrapper's dispatch cannot be traced or exported.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from torch import nn

from aitune.errors import TuningError
from aitune.markers import AOT_REGION_KIND
from aitune.torch.jit.config import JitConfig
from aitune.torch.jit.patched_module import JitSession, PatchedModule
from aitune.torch.jit.session import EXPLICIT_MODE, PROCESS, claim
from aitune.torch.jit.state import JitState
from aitune.torch.performance.regions import is_transparent_container
from aitune.torch.registry import MODULE_REGISTRY, ModuleRegistry
from aitune.torch.tuning.paths import module_at


class JITRegistration:
    """The one batch of modules registered for JIT tuning in this process."""

    def __init__(self, session: JitSession, patched: list[PatchedModule]) -> None:
        self._session = session
        self._patched = patched

    def __enter__(self) -> JITRegistration:
        return self

    def __exit__(self, *exc: object) -> None:
        self.detach()

    @property
    def modules(self) -> list[nn.Module]:
        """The registered modules, deduplicated, in input order."""
        return [patched.module for patched in self._patched]

    @property
    def patched(self) -> list[PatchedModule]:
        """The patched form of each registered module (state, fully qualified name, hierarchy)."""
        return list(self._patched)

    @property
    def reports(self) -> list[dict[str, Any]]:
        """A fresh tuning report entry per module that tried to tune, with its current state, in input order."""
        return [entry for entry in (patched.report_entry() for patched in self._patched) if entry is not None]

    @property
    def state_counts(self) -> dict[str, int]:
        """How many registered modules are in each state (every state listed, zeros included)."""
        counts = Counter(patched.state.value for patched in self._patched)
        return {state.value: counts[state.value] for state in JitState}

    @property
    def all_tuned(self) -> bool:
        """True when every registered module runs tuned code: tuned itself, or inside a tuned target."""
        return all(p.state is JitState.TUNED or p.absorbed_by is not None for p in self._patched)

    def detach(self) -> None:
        """Restore every registered module; cached forwards run the originals. The batch cannot be replaced."""
        self._session.detach_all()
        if PROCESS.session is self._session:
            PROCESS.session = None


def register_for_jit_tuning(
    modules: nn.Module | Iterable[nn.Module | str],
    config: JitConfig | None = None,
    *,
    root: Any = None,
    registry: ModuleRegistry | None = None,
) -> JITRegistration:
    """Register existing modules for JIT tuning; a ``ModuleList`` (or ``ModuleDict``) passed directly registers
    its elements. One batch per process, never mixed with global interception.

    With ``root``, items may be dotted paths under it, as profiles and ``aitune-profile suggest`` write them
    (``register_for_jit_tuning(["unet", "vae"], root=pipe)``), and a module given by path is named by
    it in profiles (``jit_module:unet``) rather than by its class. Installation is all-or-nothing: if one
    module cannot be patched, none is, and the error names it.
    """
    registry = registry if registry is not None else MODULE_REGISTRY
    items, names = _resolve_paths(modules, root)
    targets = _targets(items)
    _check_not_aot_managed(targets, registry)
    _check_batch_allowed()
    session = JitSession(config or JitConfig(), registry)
    patched = _install_all(session, targets, names)
    claim(EXPLICIT_MODE)
    PROCESS.session, PROCESS.registered_batch = session, True
    return JITRegistration(session, patched)


def _resolve_paths(modules: Any, root: Any) -> tuple[Any, dict[int, str]]:
    """The items with every path resolved under ``root``, and each such module's path by its id."""
    if isinstance(modules, nn.Module):
        return modules, {}
    items = [modules] if isinstance(modules, str) else list(modules)
    paths = [item for item in items if isinstance(item, str)]
    if not paths:
        return items, {}
    if root is None:
        raise TuningError(
            f"register_for_jit_tuning got the path {paths[0]!r} but no root; pass root=<the object"
            " the paths start from>."
        )
    resolved = [module_at(root, item) if isinstance(item, str) else item for item in items]
    names = {id(module): item for item, module in zip(items, resolved, strict=True) if isinstance(item, str)}
    return resolved, names


def _targets(modules: nn.Module | Iterable[nn.Module]) -> list[nn.Module]:
    if isinstance(modules, nn.ModuleDict):
        items: list[Any] = list(modules.values())
    elif isinstance(modules, nn.Module) and not isinstance(modules, nn.ModuleList):
        items = [modules]
    else:
        items = list(modules)
    for index, item in enumerate(items):
        _check_target(index, item)
    if not items:
        raise TuningError("register_for_jit_tuning got no modules; pass the modules to tune.")
    return list({id(item): item for item in items}.values())


def _check_target(index: int, item: Any) -> None:
    if not isinstance(item, nn.Module):
        raise TuningError(f"item {index} is a {type(item).__name__}, not an nn.Module; pass modules only.")
    if is_transparent_container(item):
        raise TuningError(
            f"item {index} is a {type(item).__name__}, which is never called; pass it on its own to register its"
            " elements, or list the modules inside it."
        )


def _check_not_aot_managed(targets: list[nn.Module], registry: ModuleRegistry) -> None:
    for entry in registry:
        if entry.kind != AOT_REGION_KIND:
            continue
        inside = {id(module) for module in entry.underlying.modules()}
        for index, target in enumerate(targets):
            if id(target) in inside or any(id(module) == id(entry.underlying) for module in target.modules()):
                raise TuningError(
                    f"item {index} ({type(target).__name__}) overlaps aitune.torch.Module '{entry.name}';"
                    " close that wrapper or register modules outside it."
                )


def _check_batch_allowed() -> None:
    if PROCESS.mode not in (None, EXPLICIT_MODE):
        claim(EXPLICIT_MODE)  # raises the mixing error
    if PROCESS.registered_batch:
        raise TuningError(
            "modules were already registered for JIT tuning in this process, and it takes one batch;"
            " register all of them in one register_for_jit_tuning() call."
        )


def _install_all(session: JitSession, targets: list[nn.Module], names: dict[int, str]) -> list[PatchedModule]:
    installed: list[PatchedModule] = []
    try:
        for index, module in enumerate(targets):
            try:
                installed.append(session.adopt(module, names.get(id(module))))
            except Exception as error:
                raise TuningError(
                    f"could not patch item {index} ({type(module).__name__}) for JIT tuning ({error});"
                    " no module was registered."
                ) from error
    except BaseException:
        for patched in reversed(installed):
            patched.detach()
        raise
    return installed
