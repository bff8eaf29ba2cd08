"""The states of a JIT-patched module."""

from __future__ import annotations

from enum import Enum


class JitState(Enum):
    """``init`` → ``recording`` → ``tuned``, or ``eager`` when tuning failed (its children become candidates).

    ``skipped``: excluded by a rule; it runs its own forward and its children stay candidates.
    ``detached``: no longer managed (a tuned ancestor runs its code, or JIT was disabled); its
    forward, even a reference cached before, runs the original.
    """

    INIT = "init"
    RECORDING = "recording"
    TUNED = "tuned"
    EAGER = "eager"
    SKIPPED = "skipped"
    DETACHED = "detached"
