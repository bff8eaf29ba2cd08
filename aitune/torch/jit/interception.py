"""Global interception: patch every module built while it is on, plus the session-wide controls.

``enable_interception()`` turns it on until ``disable()``; ``intercept()`` (a context manager and a decorator)
turns it on around model construction only. Either way the modules built meanwhile stay managed
until ``disable()``, which detaches them all.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import ContextDecorator
from typing import Any

from torch import nn

from aitune.errors import TuningError
from aitune.torch.jit.config import JitConfig
from aitune.torch.jit.hierarchy import hierarchy_lines, history_lines
from aitune.torch.jit.patched_module import JitSession
from aitune.torch.jit.rules import is_interceptable
from aitune.torch.jit.session import GLOBAL_MODE, PROCESS, claim, require_session
from aitune.torch.registry import MODULE_REGISTRY, ModuleRegistry


def enable_interception(config: JitConfig | None = None, *, registry: ModuleRegistry | None = None) -> JitSession:
    """Intercept every module built from now on until ``disable()``; ``config`` replaces the session's."""
    session = _start(config, registry)
    if not PROCESS.enabled:
        PROCESS.enabled = True
        _hold()
    return session


def disable() -> None:
    """Stop interception and detach every patched module (cached forwards run the originals again)."""
    if PROCESS.mode != GLOBAL_MODE:
        return
    PROCESS.enabled, PROCESS.holds = False, 0
    if PROCESS.undo_interception is not None:
        PROCESS.undo_interception()
        PROCESS.undo_interception = None
    if PROCESS.session is not None:
        PROCESS.session.detach_all()
        PROCESS.session = None


class intercept(ContextDecorator):  # lower case: used like a function, `with intercept():` or `@intercept()`
    """Intercept the modules built inside the block (or the decorated call); they stay managed afterwards.

    Example::

        with aitune.torch.jit.intercept(JitConfig(tune_after=2)):
            pipe = build_pipeline()
        pipe(prompt)  # records
        pipe(prompt)  # tunes top down, then runs tuned
    """

    def __init__(self, config: JitConfig | None = None, *, registry: ModuleRegistry | None = None) -> None:
        self.config = config
        self.registry = registry

    def __enter__(self) -> JitSession:
        session = _start(self.config, self.registry)
        _hold()
        return session

    def __exit__(self, *exc: object) -> None:
        _release()


def arm() -> None:
    """Deferred mode: recording is complete; every ready module tunes on its next forward."""
    session = require_session("arm()")
    _require_deferred(session, "arm()")
    session.armed = True


def disarm() -> None:
    """Deferred mode: cancel ``arm()``; modules keep recording."""
    session = require_session("disarm()")
    _require_deferred(session, "disarm()")
    session.armed = False


def print_hierarchy(sink: Callable[[str], Any] = print) -> None:
    """Print the call hierarchy found so far, one module a line with its state."""
    session = PROCESS.session
    for line in hierarchy_lines(session.heads if session is not None else []):
        sink(line)


def print_history(sink: Callable[[str], Any] = print) -> None:
    """Print every state change of the session, in order."""
    session = PROCESS.session
    for line in history_lines(session.history if session is not None else []):
        sink(line)


def _require_deferred(session: JitSession, action: str) -> None:
    if session.config.mode != "deferred":
        raise TuningError(
            f"{action} applies to deferred mode and this session is in {session.config.mode} mode;"
            " pass JitConfig(mode='deferred')."
        )


def _start(config: JitConfig | None, registry: ModuleRegistry | None) -> JitSession:
    claim(GLOBAL_MODE)
    if PROCESS.session is None:
        PROCESS.session = JitSession(config or JitConfig(), registry or MODULE_REGISTRY)
    elif config is not None:
        PROCESS.session.config = config
    return PROCESS.session


def _hold() -> None:
    PROCESS.holds += 1
    if PROCESS.undo_interception is None:
        PROCESS.undo_interception = _patch_module_init(_on_module_built)


def _release() -> None:
    PROCESS.holds = max(0, PROCESS.holds - 1)
    if PROCESS.holds == 0 and PROCESS.undo_interception is not None:
        PROCESS.undo_interception()
        PROCESS.undo_interception = None


def _on_module_built(module: nn.Module) -> None:
    session = PROCESS.session
    if session is None or session.tuning is not None or session.find(module) is not None:
        return
    if is_interceptable(module, session.config):
        session.adopt(module)


def _patch_module_init(on_built: Callable[[nn.Module], None]) -> Callable[[], None]:
    """Wrap ``nn.Module.__init__`` so that ``on_built`` sees every new module; returns the undo."""
    original = nn.Module.__init__
    active = [True]

    @functools.wraps(original)
    def init(self: nn.Module, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        if active[0]:
            on_built(self)

    nn.Module.__init__ = init

    def undo() -> None:
        active[0] = False
        # Dynamo wraps nn.Module.__init__ too, on its first compile: if it wrapped ours meanwhile,
        # restoring the original would drop its wrapper, so ours stays in the chain, inactive.
        if nn.Module.__init__ is init:
            nn.Module.__init__ = original

    return undo
