"""Run-wide locks for tests that must not overlap under pytest-xdist (every worker shares them)."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

HEAVY_HISTORY_TESTS = "history-heavy"
"""The history's concurrent writers (test_history_store.py) and its timed captures (test_history_check.py):
the writers' processes would stretch the captures, and the check would see a slowdown that is the test's own."""


@contextlib.contextmanager
def one_at_a_time(tmp_path_factory, name: str) -> Iterator[None]:
    """Hold the run-wide lock ``name``; without pytest-xdist there is nothing to wait for."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        yield
        return
    with open(tmp_path_factory.getbasetemp().parent / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield
