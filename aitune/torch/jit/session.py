"""The one process-wide holder of the active JIT session (`aitune.torch.jit.patched_module.JitSession`).

Process-global state cannot be avoided entirely: interception patches ``nn.Module.__init__``, which
every module built anywhere in the process runs, so the active session and the process's JIT mode
(global interception or explicit registration, never both) live in one small object, ``PROCESS``.
``reset()`` empties it; the test suite checks after every test that it is clean.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from aitune.errors import TuningError
from aitune.torch.jit.patched_module import JitSession

GLOBAL_MODE = "global interception"
EXPLICIT_MODE = "explicit registration"


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
