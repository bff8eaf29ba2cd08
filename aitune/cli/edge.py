"""The command line's edge: aitune errors become one ``[error]`` line and exit code 2.

Exit codes: 0 success, 1 a gate failed (compare, validate), 2 bad usage or bad input.
"""

from __future__ import annotations

import functools
import sys
import traceback
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import typer

from aitune.errors import AituneError, UserCodeError

EXIT_GATE_FAILED = 1
EXIT_BAD_INPUT = 2

Command = TypeVar("Command", bound=Callable[..., Any])


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """Print ``[error] message`` on stderr and exit with ``code``; document text in it cannot reach the terminal raw."""
    from aitune.report.safe_text import visible  # here: `--help` and a command that succeeds need no report module

    sys.stderr.write(f"[error] {visible(message)}\n")
    raise typer.Exit(code)


def guarded(command: Command) -> Command:
    """Run a command so that an `AituneError` is one line on stderr and exit code 2.

    With ``--debug`` the traceback is printed first; a failure of the user's own code shows the
    user's traceback either way, as Python would have.
    """

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except AituneError as error:
            if kwargs.get("debug"):
                traceback.print_exc()
            elif isinstance(error, UserCodeError) and error.details:
                sys.stderr.write(error.details)
            fail(str(error))

    return run  # type: ignore[return-value]
