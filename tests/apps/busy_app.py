"""A workload of known wall time for the compare gate: ``infer`` spins 200 ms, ``infer_slower`` 30% longer.

aitune-profile capture tests/apps/busy_app.py:infer --input x
"""

from __future__ import annotations

import time

import torch
from torch import nn


def busy_wait(ms: float) -> float:
    """Spin for ``ms`` milliseconds of wall time; returns the µs really spent (a busy machine overshoots).

    The one spin loop of the tests (`tests/busy.py` imports it): this file is also run by path, as an app.
    """
    start = time.perf_counter()
    end = start + ms / 1000
    while time.perf_counter() < end:
        pass
    return (time.perf_counter() - start) * 1e6


class Spin(nn.Module):
    def __init__(self, ms: float) -> None:
        super().__init__()
        self.ms = ms
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        busy_wait(self.ms)
        return self.linear(x)


class Pipeline:
    def __init__(self) -> None:
        self.encoder = Spin(40)
        self.denoiser = Spin(150)

    def __call__(self, x: torch.Tensor, slowdown: float = 1.0) -> torch.Tensor:
        # A spin overshoots only when its deadline passes while a busy machine has preempted it: few, long
        # spins keep that overshoot small against the run. All the slowdown goes to the denoiser.
        self.denoiser.ms = 150 + 200 * (slowdown - 1)
        x = self.encoder(x)
        busy_wait(10)
        return self.denoiser(x)


pipe = Pipeline()
x = torch.ones(1, 4)


def infer(x: torch.Tensor) -> torch.Tensor:
    return pipe(x)


def infer_slower(x: torch.Tensor) -> torch.Tensor:
    return pipe(x, slowdown=1.3)
