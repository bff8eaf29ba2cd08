"""The ledger of predictions: how far suggest's predicted gains were from what `tune` verified.

Per backend and device: the bias of predicted ÷ verified (its geometric mean: 1.25 means predictions
ran 25% high), the spread (the geometric standard deviation, a factor ≥ 1), and Kendall's τ-b
between predicted and verified gains (1: the ranking was right, 0: no better than chance).
Speedups are end to end (before ÷ after, 1.0 = no change). Pure functions; no database.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Prediction:
    """One tuned region's predicted and verified end-to-end speedups (verified None: not verified)."""

    backend: str
    device: str
    region: str
    predicted: float
    verified: float | None


@dataclass(frozen=True)
class LedgerRow:
    """The ledger's figures for one backend on one device."""

    backend: str
    device: str
    count: int  # predictions with a verified outcome
    bias: float | None  # geometric mean of predicted ÷ verified
    spread: float | None  # geometric standard deviation of predicted ÷ verified (needs 2)
    kendall_tau: float | None  # between predicted and verified (needs 2, and not all tied)


def kendall_tau(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Kendall's τ-b of two paired sequences; None for fewer than 2 pairs or when either side is all ties.

    >>> kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]), kendall_tau([1, 2, 3], [3, 2, 1])
    (1.0, -1.0)
    """
    concordant = discordant = tied_x = tied_y = 0
    for i in range(len(xs)):
        for j in range(i + 1, len(xs)):
            dx, dy = xs[i] - xs[j], ys[i] - ys[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                tied_x += 1
            elif dy == 0:
                tied_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    denominator = math.sqrt((concordant + discordant + tied_x) * (concordant + discordant + tied_y))
    return (concordant - discordant) / denominator if denominator > 0 else None


def ledger_row(backend: str, device: str, predictions: Sequence[Prediction]) -> LedgerRow:
    """The figures over ``predictions`` that have a positive predicted and verified speedup."""
    pairs = [(p.predicted, p.verified) for p in predictions if p.verified and p.verified > 0 and p.predicted > 0]
    logs = [math.log(predicted / verified) for predicted, verified in pairs]
    bias = math.exp(statistics.fmean(logs)) if logs else None
    spread = math.exp(statistics.stdev(logs)) if len(logs) >= 2 else None
    tau = kendall_tau([p for p, _ in pairs], [v for _, v in pairs]) if len(pairs) >= 2 else None
    return LedgerRow(backend, device, len(pairs), bias, spread, tau)


def ledger(predictions: Iterable[Prediction]) -> list[LedgerRow]:
    """One row per (backend, device), sorted by them."""
    groups: dict[tuple[str, str], list[Prediction]] = {}
    for prediction in predictions:
        groups.setdefault((prediction.backend, prediction.device), []).append(prediction)
    return [ledger_row(backend, device, groups[(backend, device)]) for backend, device in sorted(groups)]
