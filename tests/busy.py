"""Modules that burn known wall time: attribution can then be checked against exact shares."""

from __future__ import annotations

import torch
from apps.busy_app import busy_wait
from torch import nn


class RunCalls:
    """Which call of a workload each measured run of a capture was, told by the capture's ``on_warmed_up``.

    The measured runs follow the user warmups (their number varies: more run until the times are steady)
    and one warmup with the instrumentation installed (the schedule in aitune/torch/performance/capture.py);
    a full capture's operator runs come after them. On a busy machine no two calls take the same time, so a
    run's shares must be checked against the times its own call measured, never another call's.
    """

    def __init__(self, calls: list[float]) -> None:
        self._calls = calls  # grows by one item per call of the workload (a module's `spent_us`)
        self._first: int | None = None

    def on_warmed_up(self, total_calls: int) -> None:
        self._first = len(self._calls) + 1

    def __getitem__(self, run: int) -> int:
        """The index, in the workload's calls, of measured run ``run``."""
        assert self._first is not None, "pass on_warmed_up=calls.on_warmed_up to the capture"
        return self._first + run


def median_gap(pairs: list[tuple[float, float]]) -> float:
    """Median |measured − expected| over runs: one run stretched by a preemption cannot decide a test."""
    gaps = sorted(abs(measured - expected) for measured, expected in pairs)
    return gaps[len(gaps) // 2]


class Busy(nn.Module):
    """Burns ``ms`` milliseconds, then applies a small real linear layer."""

    def __init__(self, ms: float) -> None:
        super().__init__()
        self.ms = ms
        self.linear = nn.Linear(4, 4)
        self.spent_us: list[float] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.spent_us.append(busy_wait(self.ms))
        return self.linear(x)


class Decoder(nn.Module):
    """Reached through ``decode``, which calls ``self(...)``: the forward is a region nested in ``decode``'s."""

    def __init__(self, ms: float) -> None:
        super().__init__()
        self.body = Busy(ms)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)

    def decode(self, x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        return self(x * scale)


class BusyPipeline:
    """10 ms encoder, 30 ms denoiser, 10 ms of glue outside every module: shares 0.2 / 0.6 / 0.2.

    Long enough that a busy machine preempting a spin (a few ms) moves a share by little.
    """

    def __init__(self) -> None:
        torch.manual_seed(0)
        self.encoder = Busy(10)
        self.denoiser = Busy(30)
        self.glue_spent_us: list[float] = []

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x = self.encoder(x)
        self.glue_spent_us.append(busy_wait(10))
        return self.denoiser(x)


class TwoLevelBlock(nn.Module):
    """A block with two sub-blocks of known cost (4 ms, 8 ms) and 4 ms of its own work between them."""

    def __init__(self) -> None:
        super().__init__()
        self.first = Busy(4)
        self.second = Busy(8)
        self.own_spent_us: list[float] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.first(x)
        self.own_spent_us.append(busy_wait(4))
        return self.second(x)


class TwoLevelModel(nn.Module):
    """Calls its block (16 ms) and spins 4 ms itself: block 0.8 of the run, first 0.2, second 0.4."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.block = TwoLevelBlock()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.block(x)
        busy_wait(4)
        return x


class Shard(nn.Module):
    """One rank's share of a block: a 2 ms attention, then an MLP of ``mlp_ms`` (3 ms on a balanced rank)."""

    def __init__(self, mlp_ms: float = 3.0) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.attention = Busy(2)
        self.mlp = Busy(mlp_ms)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.attention(x))
