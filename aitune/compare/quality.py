"""The task gate's bar and verdict: how much a reduced precision may change what the model is for (no torch).

A reduced precision (``bf16``, ``int8``) is judged on the workload's final output, not per module: the
metric follows the output's kind (`DEFAULT_BARS`), ``--quality METRIC>=VALUE`` overrides it, and the
verdict is a `TaskJudgment` that the tuning report, the plan and the compare output carry. The
figures themselves are measured on the torch side (`aitune.torch.tuning.task_gate`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from aitune.compare.report_model import TaskGate
from aitune.compare.task_metrics import COSINE, METRICS, PRECISIONS, PSNR, TOKENS, TOP1
from aitune.errors import TuningError
from aitune.report.formatting import bar_verdict

LABELS: dict[str, tuple[str, str]] = {
    TOP1: ("top-1 agreement", ""),
    TOKENS: ("token agreement", ""),
    PSNR: ("PSNR", "dB"),
    COSINE: ("cosine", ""),
}
"""Each metric as a reader names it, and its unit."""

DEFAULT_BARS: dict[str, float] = {TOP1: 0.99, TOKENS: 0.95, PSNR: 30.0, COSINE: 0.99}
"""The default bar per metric (the docs' "Reduced precision" table states the same values)."""


@dataclass(frozen=True)
class QualityBar:
    """``metric >= minimum``: what the task gate requires of the reduced-precision run's final output."""

    metric: str
    minimum: float

    def shown(self) -> str:
        return f"{self.metric}>={self.minimum:g}"


def default_bar(metric: str) -> QualityBar:
    return QualityBar(metric, DEFAULT_BARS[metric])


_BAR = re.compile(r"^\s*([a-z0-9_]+)\s*>=\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*$")


def parse_bar(text: str) -> QualityBar:
    """``"top1_agreement>=0.98"`` as a `QualityBar`; `TuningError` naming the metrics and ranges otherwise.

    >>> parse_bar("psnr_db>=28")
    QualityBar(metric='psnr_db', minimum=28.0)
    """
    match = _BAR.match(text)
    known = ", ".join(f"{name} ({low:g}..{high:g})" for name, (low, high) in METRICS.items())
    if match is None or match.group(1) not in METRICS:
        raise TuningError(f"--quality {text[:80]!r} is not METRIC>=VALUE; the metrics are {known}.")
    metric, minimum = match.group(1), float(match.group(2))
    low, high = METRICS[metric]
    if not (math.isfinite(minimum) and low <= minimum <= high):
        raise TuningError(f"--quality {metric}>={minimum:g} is outside the metric's range {low:g}..{high:g}.")
    return QualityBar(metric, minimum)


def check_precision(precision: str) -> str:
    """``precision`` when it is one of `PRECISIONS`, else `TuningError` listing them."""
    if precision not in PRECISIONS:
        raise TuningError(f"unknown precision {str(precision)[:40]!r}; choose one of {', '.join(PRECISIONS)}.")
    return precision


def pooled(metric: str, figures: Sequence[tuple[float, int]]) -> float:
    """One figure over several inputs from each input's ``(value, decisions)``: an agreement is the share over
    all their decisions (the mean weighted by them); PSNR and cosine are the worst input's.

    >>> pooled(TOP1, [(1.0, 30), (0.5, 10)])
    0.875
    >>> pooled(PSNR, [(41.0, 1), (28.5, 1)])
    28.5
    """
    if metric in (TOP1, TOKENS):
        total = sum(weight for _, weight in figures)
        return sum(value * weight for value, weight in figures) / total if total else 1.0
    return min(value for value, _ in figures)


@dataclass(frozen=True)
class TaskJudgment:
    """The task gate's verdict on the reduced-precision regions ``regions`` over ``inputs`` workload inputs
    (the recorded one and any ``--eval-inputs``).

    ``value`` is the measured figure (None when the output could not be judged, with ``problem``
    saying why); ``first_divergence`` is the first token position where greedy generation differed
    (None when it never did, or for other metrics).
    """

    precision: str
    metric: str
    minimum: float
    value: float | None
    regions: tuple[str, ...]
    inputs: int = 1
    first_divergence: int | None = None
    problem: str | None = None

    @property
    def passed(self) -> bool:
        return self.problem is None and self.value is not None and self.value >= self.minimum

    def line(self) -> str:
        """``task gate (bf16): token_agreement 1.000 >= 0.95: passed``, or why not."""
        head = f"task gate ({self.precision}): "
        if self.value is None:
            return f"{head}could not judge: {self.problem}"
        verdict = "passed" if self.passed else "refused, the regions run in fp32"
        diverged = f", first divergent token at {self.first_divergence}" if self.first_divergence is not None else ""
        over = f" over {self.inputs} inputs" if self.inputs > 1 else ""
        figure = _figure(self.metric, self.value)
        return f"{head}{self.metric} {figure} >= {self.minimum:g}{over}{diverged}: {verdict}"

    def verdict(self) -> str:
        """The figure against the bar for a reader (`aitune.report.formatting.bar_verdict`): ``int8: top-1
        agreement 0.94 < 0.99, refused``; a problem, when there is one, is said after it."""
        label, unit = LABELS[self.metric]
        shown = bar_verdict(self.precision, label, self.value, self.minimum, unit=unit, inputs=self.inputs)
        return f"{shown}: {self.problem}" if self.problem is not None else shown

    @staticmethod
    def from_dict(data: Any) -> TaskJudgment | None:
        """The record of its `to_dict` form, converted into the compare report's `TaskGate`, or None when ``data``
        is not one (a reader decides what that means)."""
        try:
            return TaskJudgment.from_record(msgspec.convert(data, TaskGate))
        except msgspec.ValidationError:
            return None

    @staticmethod
    def from_record(gate: TaskGate) -> TaskJudgment:
        """The verdict a typed ``task_gate`` holds (a compare report's, or a plan's converted by `from_dict`)."""
        return TaskJudgment(
            gate.precision,
            gate.metric,
            gate.minimum,
            gate.value,
            tuple(gate.regions),
            gate.inputs,
            gate.first_divergence,
            gate.problem,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "precision": self.precision,
            "metric": self.metric,
            "minimum": self.minimum,
            "value": self.value,
            "passed": self.passed,
            "regions": list(self.regions),
            "inputs": self.inputs,
            "first_divergence": self.first_divergence,
            "problem": self.problem,
        }


def _figure(metric: str, value: float) -> str:
    return f"{value:.1f} dB" if metric == PSNR else f"{value:.4f}"
