"""The correctness gate: a candidate's outputs must match the original module's on every recorded sample.

Structured outputs (tuples, dicts, Hugging Face ``ModelOutput``, cache objects, dataclasses) are compared
leaf by leaf: the same containers and object types at the same places, tensors with exactly the
same shapes and dtypes and values within dtype-aware tolerances
(``|candidate - reference| <= atol + rtol * |reference|`` everywhere), other values equal. A leaf
object that offers no way to compare it fails the gate, saying so. The figures reported either way
are the max absolute error and the cosine similarity, the worst over all samples and output tensors.
For a sample whose inputs hold state (a cache the forward grows), the inputs after the call are
compared the same way: a candidate must leave the state as the original does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from aitune.report.formatting import percent
from aitune.torch.snapshot import BY_IDENTITY, SnapshotError, walk

# (rtol, atol) per reference dtype; integer and bool outputs must be equal.
DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-9),
    torch.float32: (1e-3, 1e-4),
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (2e-2, 1e-2),
}


@dataclass(frozen=True)
class Tolerance:
    """The gate's tolerances; None takes the reference dtype's default from ``DEFAULT_TOLERANCES``.

    With ``tf32`` (`on` a CUDA device whose float32 convolutions or matrix products may run in TF32, as
    PyTorch's default lets cuDNN's convolutions do), a float32 output's default is float16's: TF32 keeps
    float16's 10-bit mantissa, so the eager reference itself is only that precise, and a compiled graph
    that folds a batch norm into a TF32 convolution differs from it by that much (an H200: 3.4e-4 at 1%
    of a ResNet stage's outputs, cosine 1.000000). The default atol is then scaled by the output's root
    mean square where that is above 1: a sum's TF32 rounding grows with its terms, not with its result.
    Explicit ``rtol`` and ``atol`` are kept as given.
    """

    rtol: float | None = None
    atol: float | None = None
    tf32: bool = False

    def for_dtype(self, dtype: torch.dtype) -> tuple[float, float]:
        """``(rtol, atol)`` for outputs of ``dtype``."""
        level = torch.float16 if self.at_tf32(dtype) else dtype
        rtol, atol = DEFAULT_TOLERANCES.get(level, (0.0, 0.0))
        return (rtol if self.rtol is None else self.rtol, atol if self.atol is None else self.atol)

    def at_tf32(self, dtype: torch.dtype) -> bool:
        """Whether outputs of ``dtype`` are judged at TF32's resolution (float32 ones, with ``tf32``)."""
        return self.tf32 and dtype == torch.float32

    def admits(self, precision: torch.dtype, reference: torch.dtype) -> bool:
        """Whether computing in ``precision`` can pass: its resolution must be within the reference dtype's rtol
        (float32's own, even under TF32: a reduced precision's range is judged on the task, not widened here)."""
        return replace(self, tf32=False).for_dtype(reference)[0] >= torch.finfo(precision).eps

    def on(self, device: torch.device) -> Tolerance:
        """These tolerances as they apply to outputs computed on ``device`` (see ``tf32``)."""
        return replace(self, tf32=tf32_in_use(device))

    def to_dict(self) -> dict[str, float | None]:
        return {"rtol": self.rtol, "atol": self.atol}


def tf32_in_use(device: torch.device) -> bool:
    """Whether float32 convolutions or matrix products on ``device`` may run in TF32 (PyTorch's flags)."""
    return device.type == "cuda" and bool(torch.backends.cudnn.allow_tf32 or torch.backends.cuda.matmul.allow_tf32)


@dataclass(frozen=True)
class Agreement:
    """How closely a candidate matched the reference; ``problem`` says why it failed, None when it passed."""

    max_abs_error: float
    cosine_similarity: float
    problem: str | None

    @property
    def passed(self) -> bool:
        return self.problem is None


def check_outputs(
    references: Sequence[Any], candidates: Sequence[Any], tolerance: Tolerance, what: str = "output"
) -> Agreement:
    """Compare outputs sample by sample, leaf by leaf; the worst figures over all samples and tensors are kept."""
    worst_error, worst_cosine, problem = 0.0, 1.0, None
    for index, (reference, candidate) in enumerate(zip(references, candidates, strict=True)):
        try:
            ref_leaves, cand_leaves = _flatten(reference), _flatten(candidate)
        except SnapshotError as error:
            return Agreement(math.inf, 0.0, f"sample {index}: the {what} cannot be compared ({error})")
        mismatch = _layout_mismatch(ref_leaves, cand_leaves)
        if mismatch is not None:
            return Agreement(
                math.inf, 0.0, f"sample {index}: {what} structure differs from the original module's ({mismatch})"
            )
        for (path, ref), (_, cand) in zip(ref_leaves, cand_leaves, strict=True):
            if isinstance(ref, _Node):
                continue
            error, cosine, mismatch = _compare_leaf(ref, cand, tolerance)
            worst_error, worst_cosine = max(worst_error, error), min(worst_cosine, cosine)
            if mismatch and problem is None:
                problem = f"sample {index}, {what}{' ' + path if path else ''}: {mismatch}"
    return Agreement(worst_error, worst_cosine, problem)


def check_calls(
    references: Sequence[Any],
    reference_states: Sequence[Any],
    candidates: Sequence[tuple[Any, Any]],
    tolerance: Tolerance,
) -> Agreement:
    """The gate over `Sample.observe` results: outputs, then (for stateful samples) the inputs after the call."""
    agreement = check_outputs(references, [output for output, _ in candidates], tolerance)
    states = [state for _, state in candidates]
    if not agreement.passed or all(state is None for state in (*reference_states, *states)):
        return agreement
    for index, (reference, state) in enumerate(zip(reference_states or [None] * len(states), states, strict=True)):
        if reference is None and state is not None:
            return Agreement(
                math.inf, 0.0, f"sample {index}: it changed its input tensors in place, which the original does not"
            )
    after = check_outputs(reference_states, states, tolerance, what="input state after the call")
    return Agreement(
        max(agreement.max_abs_error, after.max_abs_error),
        min(agreement.cosine_similarity, after.cosine_similarity),
        after.problem,
    )


@dataclass(frozen=True)
class _Node:
    """A container or object in a flattened value: its type must match, its members are compared."""

    type_name: str


def _flatten(value: Any) -> list[tuple[str, Any]]:
    return [(path, member if leaf else _Node(type(member).__qualname__)) for path, member, leaf in walk(value)]


def _layout_mismatch(reference: list[tuple[str, Any]], candidate: list[tuple[str, Any]]) -> str | None:
    for (ref_path, ref), (cand_path, cand) in zip(reference, candidate, strict=False):
        if ref_path != cand_path:
            return f"{cand_path or '(whole)'} where the original has {ref_path or '(whole)'}"
        if (isinstance(ref, _Node) or isinstance(cand, _Node)) and (type(ref) is not type(cand) or ref != cand):
            return f"{_kind(cand)} at {cand_path or '(whole)'} where the original has {_kind(ref)}"
    if len(reference) != len(candidate):
        return f"{len(candidate)} parts where the original has {len(reference)}"
    return None


def _kind(member: Any) -> str:
    return f"a {member.type_name}" if isinstance(member, _Node) else f"a {type(member).__qualname__}"


def _compare_value(reference: Any, candidate: Any) -> str | None:
    """None when two non-tensor leaves agree, else why not."""
    if reference is None or candidate is None:
        return None if reference is candidate else f"{candidate!r:.80} where the original has {reference!r:.80}"
    if isinstance(reference, (*BY_IDENTITY, nn.Module)):
        return None if reference is candidate else f"{candidate!r:.80} is not {reference!r:.80}"
    if type(reference).__eq__ is object.__eq__:
        return (
            f"a {type(reference).__qualname__} object, which the gate cannot compare (it defines no equality"
            " and holds no attributes)"
        )
    if isinstance(reference, float) and isinstance(candidate, float) and math.isnan(reference):
        return None if math.isnan(candidate) else f"value {candidate!r} differs from {reference!r}"
    try:
        equal = bool(reference == candidate)
    except Exception as error:  # an equality that raises cannot vouch for the candidate
        return f"a {type(reference).__qualname__}, which the gate cannot compare ({type(error).__name__})"
    return None if equal else f"value {candidate!r:.80} differs from {reference!r:.80}"


def _compare_leaf(reference: Any, candidate: Any, tolerance: Tolerance) -> tuple[float, float, str | None]:
    if not isinstance(reference, torch.Tensor):
        if isinstance(candidate, torch.Tensor):
            return math.inf, 0.0, f"a tensor where the original has a {type(reference).__qualname__}"
        problem = _compare_value(reference, candidate)
        return (0.0, 1.0, None) if problem is None else (math.inf, 0.0, problem)
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
    finite_ref = ref.where(finite, torch.zeros_like(ref))
    difference = (cand - ref).abs().where(finite, torch.zeros_like(ref))
    error = float(difference.max())
    cosine = _cosine(finite_ref, cand.where(finite, torch.zeros_like(cand)))
    rtol, atol = tolerance.for_dtype(reference.dtype)
    tf32 = tolerance.at_tf32(reference.dtype)
    if tf32 and tolerance.atol is None:  # TF32's rounding grows with the terms summed: the output's scale
        atol *= max(1.0, float(finite_ref.pow(2).mean().sqrt()))
    outside = difference > atol + rtol * finite_ref.abs()
    if not outside.any():
        return error, cosine, None
    share = float(outside.double().mean())
    return (
        error,
        cosine,
        (
            f"max abs error {error:.3g} exceeds atol {atol:g} + rtol {rtol:g}·|reference|"
            f"{' (TF32 level)' if tf32 else ''} at {percent(share)} of"
            f" {ref.numel()} elements (cosine similarity {cosine:.6f})"
        ),
    )


def _cosine(reference: torch.Tensor, candidate: torch.Tensor) -> float:
    norms = float(reference.norm() * candidate.norm())
    if norms == 0.0:
        return 1.0 if torch.equal(reference, candidate) else 0.0
    return float((reference.flatten() @ candidate.flatten()) / norms)
