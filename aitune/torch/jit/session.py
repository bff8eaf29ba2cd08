"""A JIT tuning session, and the one process-wide holder of the active session.

A session owns what the patched modules share: the config, the stack of patched modules executing
now (per thread), the hierarchy's topmost modules, the names taken and the history. Modules get
their session passed in; nothing lives on classes.

Process-global state cannot be avoided entirely: interception patches ``nn.Module.__init__``, which
every module built anywhere in the process runs, so the active session and the process's JIT mode
(global interception or explicit registration, never both) live in one small object, ``PROCESS``.
``reset()`` empties it; the test suite checks after every test that it is clean.
"""

from __future__ import annotations

import random
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from torch import nn

from aitune.errors import TuningError
from aitune.torch.jit.config import JitConfig
from aitune.torch.jit.hierarchy import fq_name, local_name, unique_name
from aitune.torch.jit.patched_module import PatchedModule
from aitune.torch.registry import ModuleRegistry

GLOBAL_MODE = "global interception"
EXPLICIT_MODE = "explicit registration"


class JitSession:
    """The patched modules of one JIT run and what they share."""

    def __init__(self, config: JitConfig, registry: ModuleRegistry) -> None:
        self.config = config
        self.registry = registry
        self.heads: list[PatchedModule] = []
        self.history: list[str] = []
        self.armed = False
        self.tuning: PatchedModule | None = (
            None  # the module tuning now; nothing else tunes or is intercepted meanwhile
        )
        self.rng = random.Random(config.seed)
        self._patched: weakref.WeakValueDictionary[int, PatchedModule] = weakref.WeakValueDictionary()
        self._names: set[str] = set()
        self._local = threading.local()

    @property
    def stack(self) -> list[PatchedModule]:
        """The patched modules executing now in this thread, outermost first."""
        if not hasattr(self._local, "stack"):
            self._local.stack = []
        return self._local.stack

    @contextmanager
    def executing(self, patched: PatchedModule) -> Iterator[None]:
        stack = self.stack
        stack.append(patched)
        try:
            yield
        finally:
            stack.pop()

    def adopt(self, module: nn.Module, name: str | None = None) -> PatchedModule:
        """Patch ``module``'s forward with a router; its place in the hierarchy is found on its first call.

        ``name`` (a path from the user's root, ``unet``) names it when it runs topmost, instead of its class.
        """
        patched = PatchedModule(module, self, name)
        patched.install()
        self._patched[id(module)] = patched
        return patched

    def find(self, module: nn.Module) -> PatchedModule | None:
        return self._patched.get(id(module))

    def patched(self) -> list[PatchedModule]:
        """Every live patched module, in adoption order."""
        return list(self._patched.values())

    def place(self, patched: PatchedModule) -> tuple[PatchedModule | None, str]:
        """The module's parent (the innermost executing patched module) and its unique fully qualified name."""
        parent = self.stack[-1] if self.stack else None
        owner = parent.module if parent is not None else None
        local = patched.given_name if owner is None and patched.given_name else local_name(patched.module, owner)
        name = unique_name(fq_name(parent.fq_name if parent is not None else None, local), self._names)
        self._names.add(name)
        (parent.children if parent is not None else self.heads).append(patched)
        return parent, name

    def note(self, entry: str) -> None:
        self.history.append(entry)

    def detach_all(self) -> None:
        """Restore every patched module's forward; cached references to it run the original from now on."""
        for patched in self.patched():
            patched.detach()


@dataclass
class ProcessJit:
    """The process's JIT mode (fixed by its first use), its active session and its interception holds."""

    mode: str | None = None
    session: JitSession | None = None
    registered_batch: bool = False
    holds: int = 0  # open intercept() blocks, plus one while enable() is in force
    enabled: bool = False
    undo_interception: Callable[[], None] | None = field(default=None, repr=False)


PROCESS = ProcessJit()


def claim(mode: str) -> None:
    """Fix the process's JIT mode to ``mode``; global interception and explicit registration never mix."""
    if PROCESS.mode not in (None, mode):
        raise TuningError(
            f"this process already uses JIT {PROCESS.mode}, which cannot be mixed with {mode}; use one of them."
        )
    PROCESS.mode = mode


def active_session() -> JitSession | None:
    """The process's JIT session, or None when JIT tuning is not in use."""
    return PROCESS.session


def require_session(action: str) -> JitSession:
    if PROCESS.session is None:
        raise TuningError(
            f"{action} needs JIT tuning in use; enable it first (import aitune.torch.jit.enable,"
            " aitune.torch.jit.intercept() or aitune.torch.register_for_jit_tuning())."
        )
    return PROCESS.session


def reset() -> None:
    """Detach every patched module, stop interception and forget the process's JIT mode (what tests need)."""
    if PROCESS.session is not None:
        PROCESS.session.detach_all()
    if PROCESS.undo_interception is not None:
        PROCESS.undo_interception()
    fresh = ProcessJit()
    for name in vars(fresh):
        setattr(PROCESS, name, getattr(fresh, name))


def is_clean() -> bool:
    """True when no JIT session, mode or interception is active in this process."""
    return ProcessJit() == PROCESS
