"""One complete CPU-side event of a trace and the thread it ran on: the record the events model holds and
the interval sweeps read (no torch)."""

from __future__ import annotations

from typing import Any, NamedTuple

ThreadKey = tuple[Any, Any]
"""(pid, tid) of the thread a CPU span ran on."""


class Span(NamedTuple):
    """One complete CPU-side event: a run, a region entry or an operator.

    A NamedTuple rather than a frozen dataclass: a trace holds ~10⁵ of them and tuples build ~5× faster.
    """

    name: str
    start_us: float
    duration_us: float  # kept as the trace wrote it: end - start would add float noise
    thread: ThreadKey

    @property
    def end_us(self) -> float:
        return self.start_us + self.duration_us
