"""Latency measurement: warmup, then timed calls until the coefficient of variation is low or a cap is hit."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
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
    return measure_interleaved([call], config, device)[0]


def measure_interleaved(
    calls: Sequence[Callable[[], object]], config: MeasureConfig, device: torch.device
) -> list[Latency]:
    """Time several calls taking turns, so that machine drift hits each alike; one `Latency` per call.

    Stops once every call's CV is at most ``target_cv`` (after ``min_repeats`` rounds), or at the
    time cap or ``max_repeats`` rounds.
    """
    synchronize = torch.cuda.synchronize if device.type == "cuda" else _nothing
    times: list[list[float]] = [[] for _ in calls]
    with torch.no_grad():
        for call in calls:
            for _ in range(config.warmup):
                call()
        synchronize()
        deadline = time.perf_counter() + config.max_seconds
        for round_index in range(1, config.max_repeats + 1):
            for call, series in zip(calls, times, strict=True):
                start = time.perf_counter()
                call()
                synchronize()
                series.append((time.perf_counter() - start) * 1e6)
            settled = all(cv(series) <= config.target_cv for series in times)
            if round_index >= config.min_repeats and (settled or time.perf_counter() > deadline):
                break
    return [Latency(median_us=statistics.median(series), cv=cv(series), repeats=len(series)) for series in times]


def cv(times: list[float]) -> float:
    """Coefficient of variation (stdev / mean); 0 for fewer than two times."""
    if len(times) < 2:
        return 0.0
    mean = statistics.fmean(times)
    return statistics.stdev(times) / mean if mean > 0 else 0.0


def _nothing() -> None:
    return None
