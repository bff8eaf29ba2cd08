"""The command line's edge: aitune errors become one ``[error]`` line and exit code 2; profiler chatter is dropped.

Exit codes: 0 success, 1 a gate failed (compare, validate), 2 bad usage or bad input.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn, TextIO, TypeVar

import typer

from aitune.errors import AituneError, UserCodeError
from aitune.report.safe_text import visible

EXIT_GATE_FAILED = 1
EXIT_BAD_INPUT = 2

# Kineto prints these on stderr around every profiler session (torch 2.13: "USDT:<date> <pid>:<tid> ...").
_PROFILER_LINE = re.compile(rb"^(USDT|STAGE):\d{4}-\d\d-\d\d .*\] ")

Command = TypeVar("Command", bound=Callable[..., Any])


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """Print ``[error] message`` on stderr and exit with ``code``; document text in it cannot reach the terminal raw."""
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


@contextmanager
def without_profiler_lines() -> Iterator[TextIO]:
    """Route file descriptor 2 through a filter that drops Kineto's session lines, for the block.

    Everything else written to stderr (the user's script included, from Python or C) passes
    through unchanged. Yields a text stream on the real stderr for progress displays.
    """
    sys.stderr.flush()
    real_fd = os.dup(2)
    read_fd, write_fd = os.pipe()
    os.dup2(write_fd, 2)
    os.close(write_fd)
    forwarder = threading.Thread(target=_forward, args=(read_fd, real_fd), daemon=True)
    forwarder.start()
    real_stream = os.fdopen(os.dup(real_fd), "w", buffering=1)
    try:
        yield real_stream
    finally:
        sys.stderr.flush()
        real_stream.close()
        os.dup2(real_fd, 2)  # drops the pipe's last write end: the forwarder reads to the end and stops
        forwarder.join(timeout=5)  # a child process still holding the pipe keeps it alive: let it finish alone
        if not forwarder.is_alive():
            os.close(real_fd)


def _forward(read_fd: int, real_fd: int) -> None:
    pending = b""
    with os.fdopen(read_fd, "rb", buffering=0) as source:
        while chunk := source.read(65536):
            *lines, pending = (pending + chunk).split(b"\n")
            kept = [line + b"\n" for line in lines if not _PROFILER_LINE.match(line)]
            if kept:
                os.write(real_fd, b"".join(kept))
    if pending and not _PROFILER_LINE.match(pending):
        os.write(real_fd, pending)
