"""The states of an AOT wrapper and the rules for moving between them."""

from __future__ import annotations

from enum import Enum

from aitune.errors import TuningError


class ModuleState(Enum):
    """``init`` → ``recording`` (at the first call, or ``enable_recording()``) → ``tuned``;
    ``passthrough`` behaves exactly like the original module."""

    INIT = "init"
    PASSTHROUGH = "passthrough"
    RECORDING = "recording"
    TUNED = "tuned"


def check_leave_tuned(name: str, target: ModuleState, force: bool) -> None:
    """Leaving ``tuned`` throws the tuned backends away, so it needs ``force=True``."""
    if not force:
        raise TuningError(
            f"module '{name}' is tuned; pass force=True to enable_{target.value}() to drop its tuned backends."
        )
