"""The process's thread budget: the threads torch was given, which every backend runs with too.

ONNX Runtime's session defaults (``intra_op_num_threads=0``, spinning on) take every core whatever
torch was told; on a small GRU that ran 20–50× slower than one thread, and the eager regions left
beside it slowed 1.25–3.35×. So each backend is built with torch's own counts, read when it builds.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class ThreadBudget:
    """Threads for one operator (``intra_op``) and for running operators side by side (``inter_op``)."""

    intra_op: int
    inter_op: int

    def to_dict(self) -> dict[str, Any]:
        return {"intra_op_threads": self.intra_op, "inter_op_threads": self.inter_op}


def torch_threads() -> ThreadBudget:
    """The budget torch has in this process now."""
    return ThreadBudget(intra_op=torch.get_num_threads(), inter_op=torch.get_num_interop_threads())


@contextmanager
def same_threads() -> Iterator[ThreadBudget]:
    """Keep torch's intra-op thread count as it was: a build that changes it is undone when it ends.

    Eager is timed beside every candidate under this budget; a backend that quietly raised it would be
    timed with more of the machine than the eager regions it is compared with.
    """
    budget = torch_threads()
    try:
        yield budget
    finally:
        if torch.get_num_threads() != budget.intra_op:
            torch.set_num_threads(budget.intra_op)
