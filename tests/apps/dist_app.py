"""A two-layer model whose forward all-reduces, for the distributed-capture tests; it leaves the group to aitune.

``AITUNE_TEST_FAIL_RANK=r`` makes rank r fail at its ``AITUNE_TEST_FAIL_CALL``-th call (default 3):
``AITUNE_TEST_FAIL_HOW=raise`` (default) raises ``ValueError``, ``exit`` ends the process at once,
as a crash would, without a word, and ``hang`` sleeps for an hour, as a stuck rank would.
"""

from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist
from torch import nn

FAIL_RANK = int(os.environ.get("AITUNE_TEST_FAIL_RANK", "-1"))
FAIL_CALL = int(os.environ.get("AITUNE_TEST_FAIL_CALL", "3"))
FAIL_HOW = os.environ.get("AITUNE_TEST_FAIL_HOW", "raise")


class Summed(nn.Module):
    """A linear layer whose output is summed over the ranks."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        dist.all_reduce(y)
        return y


model = nn.Sequential(Summed(), nn.ReLU(), Summed())
x = torch.randn(4, 16)
calls = 0


def infer() -> torch.Tensor:
    global calls
    calls += 1
    if dist.get_rank() == FAIL_RANK and calls == FAIL_CALL:
        if FAIL_HOW == "exit":
            os._exit(7)
        if FAIL_HOW == "hang":
            time.sleep(3600)
        raise ValueError(f"rank {FAIL_RANK} failed on purpose at call {calls}")
    return model(x)
