"""Kineto's session lines on stderr, dropped: the capture's own chatter, not the workload's.

torch's profiler (Kineto) prints a ``profiler_start`` and a ``profiler_stop`` line on file descriptor 2
around every session, from C++, so ``sys.stderr`` cannot catch them; the filter sits on the descriptor.
Torch-free: the command line uses it around whole commands, the capture around its profiler session.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

# torch 2.13: "USDT:<date> <pid>:<tid> SyncActivityProfilerHandler.cpp:52] profiler_start".
PROFILER_LINE = re.compile(rb"^(USDT|STAGE):\d{4}-\d\d-\d\d .*\] ")


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
            kept = [line + b"\n" for line in lines if not PROFILER_LINE.match(line)]
            if kept:
                os.write(real_fd, b"".join(kept))
    if pending and not PROFILER_LINE.match(pending):
        os.write(real_fd, pending)
