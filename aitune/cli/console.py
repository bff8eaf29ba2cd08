"""One terminal for every command (`app`, `history`): a rich Console, made on first print."""

from __future__ import annotations

import os
import sys
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


@cache
def _console() -> Console:
    """The terminal the commands print to, made on first print: ``--help`` and a failed parse never pay for it."""
    from rich.console import Console

    from aitune.cli.render import PIPE_WIDTH

    # Piped output goes to tools and logs: rich's default of 80 columns there would split values mid-line.
    return Console(highlight=False, width=None if sys.stdout.isatty() or "COLUMNS" in os.environ else PIPE_WIDTH)


class _LazyConsole:
    """Stands for `_console()` until a command prints (each command imports what it renders)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_console(), name)


console = _LazyConsole()
