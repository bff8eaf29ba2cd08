"""Modules that burn known wall time: attribution can then be checked against exact shares."""

from __future__ import annotations

import time

import torch
from apps.busy_app import busy_wait
from torch import nn


def elapsed_us(start: float) -> float:
    return (time.perf_counter() - start) * 1e6


def median_gap(pairs: list[tuple[float, float]]) -> float:
    """Median |measured − expected| over runs: one run stretched by a preemption cannot decide a test."""
    gaps = sorted(abs(measured - expected) for measured, expected in pairs)
    return gaps[len(gaps) // 2]


def first_measured_call(doc: dict) -> int:
    """The workload call that was measured run 0: after the warmups (runs set aside as still warming up
    among them) and, in a lite capture, the instrumented warmup that records the input shapes."""
    lite = doc["profiler"]["mode"] == "lite"
    return doc.get("warmup", {}).get("performed", 0) + (1 if lite else 0)


class Busy(nn.Module):
    """Burns ``ms`` milliseconds, then applies a small real linear layer.

    ``spent_us`` is the wall time of the whole forward, spin and linear: a throttled VM stalls the first
    operation after a long spin by 0.5-4 ms, which the region rightly holds and the spin alone would miss.
    """

    def __init__(self, ms: float) -> None:
        super().__init__()
        self.ms = ms
        self.linear = nn.Linear(4, 4)
        self.spent_us: list[float] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        start = time.perf_counter()
        busy_wait(self.ms)
        x = self.linear(x)
        self.spent_us.append(elapsed_us(start))
        return x


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
        start = time.perf_counter()
        x = self.encoder(x)
        busy_wait(10)
        x = self.denoiser(x)
        # the glue is everything the call spent outside its two modules
        self.glue_spent_us.append(elapsed_us(start) - self.encoder.spent_us[-1] - self.denoiser.spent_us[-1])
        return x


class TwoLevelBlock(nn.Module):
    """A block with two sub-blocks of known cost (4 ms, 8 ms) and 4 ms of its own work between them."""

    def __init__(self) -> None:
        super().__init__()
        self.first = Busy(4)
        self.second = Busy(8)
        self.own_spent_us: list[float] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        start = time.perf_counter()
        x = self.first(x)
        busy_wait(4)
        x = self.second(x)
        self.own_spent_us.append(elapsed_us(start) - self.first.spent_us[-1] - self.second.spent_us[-1])
        return x


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
