"""Latency measurement: warmup, then timed calls until the coefficient of variation is low or a cap is hit."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class MeasureConfig:
    """How long to measure one candidate; ``max_seconds`` caps the timed calls, not the warmup."""

    warmup: int = 2
    min_repeats: int = 5
    max_repeats: int = 50
    target_cv: float = 0.03
    max_seconds: float = 3.0


@dataclass(frozen=True)
class Latency:
    """Median time of one call in µs, its coefficient of variation, and how many calls were timed."""

    median_us: float
    cv: float
    repeats: int


def measure(call: Callable[[], object], config: MeasureConfig, device: torch.device) -> Latency:
    """Time ``call`` (under ``no_grad``), synchronising a CUDA device around each call."""
    synchronize = torch.cuda.synchronize if device.type == "cuda" else _nothing
    times: list[float] = []
    with torch.no_grad():
        for _ in range(config.warmup):
            call()
        synchronize()
        deadline = time.perf_counter() + config.max_seconds
        while len(times) < config.max_repeats:
            start = time.perf_counter()
            call()
            synchronize()
            times.append((time.perf_counter() - start) * 1e6)
            if len(times) >= config.min_repeats and (cv(times) <= config.target_cv or time.perf_counter() > deadline):
                break
    return Latency(median_us=statistics.median(times), cv=cv(times), repeats=len(times))


def cv(times: list[float]) -> float:
    """Coefficient of variation (stdev / mean); 0 for fewer than two times."""
    if len(times) < 2:
        return 0.0
    mean = statistics.fmean(times)
    return statistics.stdev(times) / mean if mean > 0 else 0.0


def _nothing() -> None:
    return None
