"""JIT tuning: patch modules as they are built (or register existing ones), record, and tune them top down."""

from aitune.torch.jit.config import DEFAULT_EXCLUDED_PACKAGES, JitConfig
from aitune.torch.jit.interception import (
    arm,
    disable,
    disarm,
    enable_interception,
    intercept,
    print_hierarchy,
    print_history,
)
from aitune.torch.jit.patched_module import JitSession, PatchedModule
from aitune.torch.jit.registration import JITRegistration, register_for_jit_tuning
from aitune.torch.jit.session import active_session, is_clean, reset
from aitune.torch.jit.state import JitState
from aitune.torch.jit.tuning import InjectedFailure

__all__ = [
    "DEFAULT_EXCLUDED_PACKAGES",
    "InjectedFailure",
    "JITRegistration",
    "JitConfig",
    "JitSession",
    "JitState",
    "PatchedModule",
    "active_session",
    "arm",
    "disable",
    "disarm",
    "enable_interception",
    "intercept",
    "is_clean",
    "print_hierarchy",
    "print_history",
    "register_for_jit_tuning",
    "reset",
]
