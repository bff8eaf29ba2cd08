"""Chrome traces written after the capture returns: one background thread per trace, and the way to wait.

A capture reads its events from the profiler's session and hands the trace's export and compression to
a thread, so the caller's next step overlaps them. The file is written whole or not at all
(`aitune.report.io.written_atomically`): a temporary beside it is renamed onto the name when complete and
removed when the write fails. The thread is not a daemon: the interpreter waits for it at exit (after
Ctrl-C too) instead of leaving a temporary behind; a process killed outright leaves at most the
temporary's private folder, never half a trace under the name.
"""

from __future__ import annotations

import atexit
import sys
import threading
from collections.abc import Callable
from pathlib import Path


class _Write:
    """One trace being written: the thread, and the error it met (raised to whoever waits)."""

    def __init__(self, path: Path, write: Callable[[], object]) -> None:
        self.path = path
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(write,), name=f"aitune trace {path.name}")

    def _run(self, write: Callable[[], object]) -> None:
        try:
            write()
        except BaseException as error:  # kept for `wait_for_traces`, which raises it in the caller's thread
            self.error = error


_LOCK = threading.Lock()
_PENDING: dict[Path, _Write] = {}


def write_later(path: Path, write: Callable[[], object]) -> None:
    """Run ``write`` (which writes ``path`` atomically) in a background thread; an earlier write of the
    same path is waited for first."""
    wait_for_traces(path)
    job = _Write(path, write)
    with _LOCK:
        _PENDING[_key(path)] = job
    job.thread.start()


def wait_for_traces(path: str | Path | None = None) -> None:
    """Block until the trace at ``path`` (every trace still being written, for None) is complete.

    Raises the error its write met (`aitune.errors.OutputError` for a full disk or a folder that went
    away), once: the file is then absent, never half written.
    """
    with _LOCK:
        jobs = list(_PENDING.values()) if path is None else [job for job in [_PENDING.get(_key(path))] if job]
    for job in jobs:
        job.thread.join()
        with _LOCK:
            if _PENDING.get(_key(job.path)) is job:
                del _PENDING[_key(job.path)]
        if job.error is not None:
            error, job.error = job.error, None
            raise error


def _key(path: str | Path) -> Path:
    return Path(path).absolute()


@atexit.register  # runs after the interpreter has joined the writing threads
def _report_unwaited() -> None:
    """A write nobody waited for that failed still says so, in its one sentence, on stderr."""
    for job in list(_PENDING.values()):
        if job.error is not None:
            print(f"aitune: {job.error}", file=sys.stderr)
