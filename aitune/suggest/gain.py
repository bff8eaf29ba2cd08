"""The gain model: what a tuned backend could make of a region, from its operator mix and measured speedups.

A region's own predicted speedup combines by time (Amdahl) the speedups this project's benchmarks
measured on work of each kind in its operator mix (`MEASURED_SPEEDUPS`). These are **CPU figures**
(torch 2.13 CPU, fp32, min-latency strategy) and are used as they are for a device profile too;
nothing here is guessed, and work no benchmark isolated gets no credit:

- convolution, matmul and attention time gets its kind's figure;
- elementwise and normalisation operators go with the region's dominant compute kind: the
  benchmark models held theirs too, and a compiling backend fuses them into that compute;
- copies, synchronisations, other operators and the time between operators: no speedup;
- a dispatch-bound region gets the dispatch-bound figure for all its operators;
- a region without an operator mix (AITune's files, older captures) gets the smallest speedup
  measured on any module.
"""

from __future__ import annotations

from dataclasses import dataclass

from aitune.suggest.candidates import Candidate


@dataclass(frozen=True)
class MeasuredSpeedup:
    """A region speedup this project measured, and where (the model and the benchmark script)."""

    speedup: float
    source: str


# From the README's tuning and JIT tables. Per kind of work, the lowest speedup measured on a
# module dominated by it (dispatch-bound modules have their own row): realistic, not best case.
MEASURED_SPEEDUPS: dict[str, MeasuredSpeedup] = {
    # benchmarks/jit_benchmark.py: the example pipeline's denoiser (convolutions, GroupNorm, SiLU),
    # ONNX Runtime 1.55× (Inductor 1.42×); other conv work gained more: the example's decoder
    # 2.2–2.34×, benchmarks/tuning_benchmark.py's ResNet-18-like backbone 2.76× (ONNX Runtime).
    "conv": MeasuredSpeedup(1.55, "the example pipeline's denoiser, benchmarks/jit_benchmark.py"),
    # benchmarks/tuning_benchmark.py: transformer encoder, 4 layers, 8 × 128 tokens, ONNX Runtime 3.29×.
    "attention": MeasuredSpeedup(3.29, "a 4-layer transformer encoder, benchmarks/tuning_benchmark.py"),
    # benchmarks/tuning_benchmark.py: MLP, 4 × 1024→4096→1024, batch 64, Inductor 1.20×.
    "matmul": MeasuredSpeedup(1.20, "a 4-layer MLP, benchmarks/tuning_benchmark.py"),
    # benchmarks/jit_benchmark.py: the example pipeline's text encoder (2 layers, 2 × 16 tokens,
    # operators of ~50 µs), ONNX Runtime 1.07×: the smallest gain measured on any module.
    "dispatch": MeasuredSpeedup(1.07, "the example pipeline's text encoder, benchmarks/jit_benchmark.py"),
}
COMPUTE_KINDS = ("conv", "matmul", "attention")
KIND_NAMES = {"conv": "convolution", "matmul": "matmul", "attention": "attention"}

DISPATCH_OPERATOR_US = 100.0
"""Host µs per operator below which dispatch, not arithmetic, dominates. Measured on a capture of the
example pipeline: the text encoder's operators average ~50 µs (it gained 1.07×), the denoiser's ~0.9 ms (1.55×)."""
LAUNCH_BOUND_DEVICE_RATIO = 0.5
"""On a device profile: a region whose device time is below this fraction of its host time waits for launches."""
UPPER_BOUND_CAP = 1e6
"""Stands for an infinite speedup (a region covering the whole run): JSON has no infinity."""


def upper_bound(share: float) -> float:
    """End-to-end speedup if a region of this share took no time: ``1 / (1 - share)``, capped.

    >>> round(upper_bound(0.8), 9)
    5.0
    """
    return min(UPPER_BOUND_CAP, 1 / (1 - share)) if share < 1 else UPPER_BOUND_CAP


def end_to_end(share: float, region_speedup: float) -> float:
    """End-to-end speedup when a region of this share runs ``region_speedup`` times faster (Amdahl).

    >>> round(end_to_end(0.5, 2.0), 3)
    1.333
    """
    rest = (1 - share) + share / region_speedup
    return 1 / rest if rest > 0 else UPPER_BOUND_CAP


def dispatch_bound(candidate: Candidate, domain: str) -> bool:
    """Host dispatch (CPU: tiny operators) or launches (device: an idle device) dominate the region."""
    if domain == "device":  # launches are cheap on the host by design; an idle device says it
        return candidate.device_us < LAUNCH_BOUND_DEVICE_RATIO * candidate.cpu_us
    return candidate.operators > 0 and candidate.operator_us / candidate.operators < DISPATCH_OPERATOR_US


def dominant_kind(candidate: Candidate) -> str | None:
    """The compute kind (`COMPUTE_KINDS`) with the most time in the region, None when it has none."""
    kind = max(COMPUTE_KINDS, key=lambda k: candidate.mix.get(k, 0.0))
    return kind if candidate.mix.get(kind, 0.0) > 0 else None


def predicted_region_speedup(candidate: Candidate, domain: str) -> float:
    """The region's own speedup under a tuned backend (≥ 1; see the module docstring)."""
    if not candidate.has_mix:
        return MEASURED_SPEEDUPS["dispatch"].speedup
    total = candidate.mix_cpu_us
    if total <= 0:
        return 1.0
    if dispatch_bound(candidate, domain):
        credited = dict.fromkeys(candidate.mix, MEASURED_SPEEDUPS["dispatch"].speedup)
    else:
        credited = {kind: MEASURED_SPEEDUPS[kind].speedup for kind in COMPUTE_KINDS}
        dominant = dominant_kind(candidate)
        if dominant is not None:
            credited["elementwise_norm"] = credited[dominant]
    saved = sum(candidate.mix.get(kind, 0.0) * (1 - 1 / speedup) for kind, speedup in credited.items())
    return total / max(total - saved, total / UPPER_BOUND_CAP)
