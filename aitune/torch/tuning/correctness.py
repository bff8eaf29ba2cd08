"""The correctness gate: a candidate's outputs must match the original module's on every recorded sample.

Shapes and dtypes must match exactly and values within dtype-aware tolerances
(``|candidate - reference| <= atol + rtol * |reference|`` everywhere). The figures reported either way
are the max absolute error and the cosine similarity, the worst over all samples and output tensors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree

# (rtol, atol) per reference dtype; integer and bool outputs must be equal.
DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-9),
    torch.float32: (1e-3, 1e-4),
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (2e-2, 1e-2),
}


@dataclass(frozen=True)
class Tolerance:
    """The gate's tolerances; None takes the reference dtype's default from ``DEFAULT_TOLERANCES``."""

    rtol: float | None = None
    atol: float | None = None

    def for_dtype(self, dtype: torch.dtype) -> tuple[float, float]:
        """``(rtol, atol)`` for outputs of ``dtype``."""
        rtol, atol = DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))
        return (rtol if self.rtol is None else self.rtol, atol if self.atol is None else self.atol)

    def admits(self, precision: torch.dtype, reference: torch.dtype) -> bool:
        """Whether computing in ``precision`` can pass: its resolution must be within the reference dtype's rtol."""
        return self.for_dtype(reference)[0] >= torch.finfo(precision).eps

    def to_dict(self) -> dict[str, float | None]:
        return {"rtol": self.rtol, "atol": self.atol}


@dataclass(frozen=True)
class Agreement:
    """How closely a candidate matched the reference; ``problem`` says why it failed, None when it passed."""

    max_abs_error: float
    cosine_similarity: float
    problem: str | None

    @property
    def passed(self) -> bool:
        return self.problem is None


def check_outputs(references: Sequence[Any], candidates: Sequence[Any], tolerance: Tolerance) -> Agreement:
    """Compare outputs sample by sample; the worst figures over all samples and tensors are kept."""
    worst_error, worst_cosine, problem = 0.0, 1.0, None
    for index, (reference, candidate) in enumerate(zip(references, candidates, strict=True)):
        ref_leaves, ref_spec = pytree.tree_flatten(reference)
        cand_leaves, cand_spec = pytree.tree_flatten(candidate)
        if ref_spec != cand_spec:
            return Agreement(math.inf, 0.0, f"sample {index}: output structure differs from the original module's")
        for position, (ref, cand) in enumerate(zip(ref_leaves, cand_leaves, strict=True)):
            error, cosine, mismatch = _compare_leaf(ref, cand, tolerance)
            worst_error, worst_cosine = max(worst_error, error), min(worst_cosine, cosine)
            if mismatch and problem is None:
                problem = f"sample {index}, output {position}: {mismatch}"
    return Agreement(worst_error, worst_cosine, problem)


def _compare_leaf(reference: Any, candidate: Any, tolerance: Tolerance) -> tuple[float, float, str | None]:
    if not isinstance(reference, torch.Tensor):
        return 0.0, 1.0, None if reference == candidate else f"value {candidate!r} differs from {reference!r}"
    if not isinstance(candidate, torch.Tensor) or candidate.shape != reference.shape:
        shape = tuple(candidate.shape) if isinstance(candidate, torch.Tensor) else type(candidate).__name__
        return math.inf, 0.0, f"shape {shape} differs from {tuple(reference.shape)}"
    if candidate.dtype != reference.dtype:
        return math.inf, 0.0, f"dtype {candidate.dtype} differs from {reference.dtype}"
    ref, cand = reference.detach().double().cpu(), candidate.detach().double().cpu()
    if ref.numel() == 0:
        return 0.0, 1.0, None
    if not torch.isfinite(cand).eq(torch.isfinite(ref)).all():
        return math.inf, 0.0, "non-finite values (NaN/Inf) where the original has none, or the reverse"
    finite = torch.isfinite(ref)
    difference = (cand - ref).abs().where(finite, torch.zeros_like(ref))
    error = float(difference.max())
    cosine = _cosine(ref.where(finite, torch.zeros_like(ref)), cand.where(finite, torch.zeros_like(cand)))
    rtol, atol = tolerance.for_dtype(reference.dtype)
    outside = difference > atol + rtol * ref.abs().where(finite, torch.zeros_like(ref))
    if not outside.any():
        return error, cosine, None
    share = float(outside.double().mean())
    return (
        error,
        cosine,
        (
            f"max abs error {error:.3g} exceeds atol {atol:g} + rtol {rtol:g}·|reference| at {share:.1%} of"
            f" {ref.numel()} elements (cosine similarity {cosine:.6f})"
        ),
    )


def _cosine(reference: torch.Tensor, candidate: torch.Tensor) -> float:
    norms = float(reference.norm() * candidate.norm())
    if norms == 0.0:
        return 1.0 if torch.equal(reference, candidate) else 0.0
    return float((reference.flatten() @ candidate.flatten()) / norms)
