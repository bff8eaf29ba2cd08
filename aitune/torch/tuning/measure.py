"""Latency measurement: warmup, then timed rounds until the caller's question is settled or a cap is hit.

The default question is "is every call's coefficient of variation low"; a strategy deciding a winner
asks its own (`aitune.torch.tuning.decision`) through ``settled``, over the per-round times kept here.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from aitune.torch.tuning.collective import job_round


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
    """Median time of one call in µs, its coefficient of variation, how many calls were timed, and each
    round's time in order (paired round by round with the calls timed beside it)."""

    median_us: float
    cv: float
    repeats: int
    times_us: tuple[float, ...] = ()
    rank_medians_us: tuple[float, ...] = ()  # under torchrun: each rank's own median; the figures above are the job's


def measure(call: Callable[[], object], config: MeasureConfig, device: torch.device) -> Latency:
    """Time ``call`` (under ``no_grad``), synchronising a CUDA device around each call."""
    return measure_interleaved([call], config, device)[0]


Settled = Callable[[list[list[float]]], bool]
"""Told every call's times so far (µs, one list per call, in rounds); True once no more rounds are needed."""


def measure_interleaved(
    calls: Sequence[Callable[[], object]],
    config: MeasureConfig,
    device: torch.device,
    settled: Settled | None = None,
) -> list[Latency]:
    """Time several calls taking turns, so that machine drift hits each alike; one `Latency` per call.

    Stops once ``settled`` says so (default: every call's CV is at most ``target_cv``) after
    ``min_repeats`` rounds, or at the time cap or ``max_repeats`` rounds. Under torchrun each round is the
    job's (`aitune.torch.tuning.collective.job_round`): every rank goes on with the slowest rank's times,
    so the ranks stop after the same round with the same figures.
    """
    settled = settled or (lambda times: all(cv(series) <= config.target_cv for series in times))
    synchronize = torch.cuda.synchronize if device.type == "cuda" else _nothing
    times: list[list[float]] = [[] for _ in calls]
    ranks: list[list[list[float]]] = []  # under torchrun, each round's rows by rank
    with torch.no_grad():
        for call in calls:
            for _ in range(config.warmup):
                call()
        synchronize()
        deadline = time.perf_counter() + config.max_seconds
        for round_index in range(1, config.max_repeats + 1):
            row = []
            for call in calls:
                start = time.perf_counter()
                call()
                synchronize()
                row.append((time.perf_counter() - start) * 1e6)
            row, past, rows = job_round(row, time.perf_counter() > deadline)
            for series, value in zip(times, row, strict=True):
                series.append(value)
            if rows is not None:
                ranks.append(rows)
            if round_index >= config.min_repeats and (settled(times) or past):
                break
    return [
        Latency(
            median_us=statistics.median(series),
            cv=cv(series),
            repeats=len(series),
            times_us=tuple(series),
            rank_medians_us=_rank_medians(ranks, index),
        )
        for index, series in enumerate(times)
    ]


def _rank_medians(rounds: list[list[list[float]]], call: int) -> tuple[float, ...]:
    """Each rank's median time of ``call`` over the ``rounds`` (rows by rank); empty when there are none."""
    if not rounds:
        return ()
    return tuple(statistics.median(rows[rank][call] for rows in rounds) for rank in range(len(rounds[0])))


def cv(times: list[float]) -> float:
    """Coefficient of variation (stdev / mean); 0 for fewer than two times."""
    if len(times) < 2:
        return 0.0
    mean = statistics.fmean(times)
    return statistics.stdev(times) / mean if mean > 0 else 0.0


def _nothing() -> None:
    return None
