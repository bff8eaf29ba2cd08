"""What a reduced precision would bring a region on this machine, and which regions would likely fail the task gate
(no torch).

The forecast scales a region's arithmetic (the gain model's split, `aitune.suggest.gain.predict`) by
`ARITHMETIC_FACTORS`, kind by kind; dispatch and other work keep their time. The factors are this
project's measurements on an AMX CPU (torch 2.13, random weights), rounded towards a smaller gain:
bf16 with compile and freezing made BERT-base 3.3× and ResNet-18 7.2× faster, int8 dynamic an MLP of
4×Linear(1024) 2.8×. A machine without the instruction sets gets no gain, with the reason. A region
whose operator time is largely softmax and normalisation (`NORM_HEAVY_SHARE`) is flagged: those
operators amplify rounding, so its final output is the first to drift past the task gate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aitune.cpuinfo import cpu_flags
from aitune.report.formatting import whole_percent

ARITHMETIC_FACTORS: dict[str, dict[str, float]] = {
    "bf16": {"matmul": 2.5, "conv": 2.5, "attention": 2.0},
    "int8": {"matmul": 2.0},  # dynamic quantization converts linear layers only
}
NORM_HEAVY_SHARE = 0.25
"""A region spending at least this share of its operator time on softmax and normalisation is flagged."""


def cpu_lacks(precision: str, flags: frozenset[str], x86: bool = True) -> str | None:
    """Why this CPU (its ``flags``) cannot run ``precision`` fast, or None when its instruction sets can."""
    if precision == "bf16" and not flags & {"amx_bf16", "avx512_bf16"}:
        return (
            "this CPU has no bfloat16 arithmetic (neither amx_bf16 nor avx512_bf16 among its flags), so bf16 "
            "would be emulated and slower than fp32; use --precision int8, or a CPU with AMX or AVX512-BF16"
        )
    if precision == "int8" and x86 and "avx2" not in flags:
        return "this CPU lacks AVX2, which int8 kernels (fbgemm) need to run faster than fp32"
    return None


INT8_DOT_PRODUCTS = ("amx_int8", "avx512_vnni", "avx_vnni")
"""The instruction sets that multiply int8 in one step, fastest first; without them fbgemm's int8 dot products
take several AVX2 instructions each, and small quantized layers lose to fp32."""


def int8_dot_products(flags: frozenset[str]) -> str | None:
    """The fastest of `INT8_DOT_PRODUCTS` among this CPU's ``flags``, or None when it has none of them."""
    return next((name for name in INT8_DOT_PRODUCTS if name in flags), None)


@dataclass(frozen=True)
class PrecisionOutlook:
    """One region at a reduced precision: its predicted own speedup (1 where refused) and the task gate's risk."""

    path: str
    precision: str
    predicted_region_speedup: float
    refused: str | None  # why this machine would not run it fast
    risk: str | None  # why the task gate would likely refuse it


def outlook(
    path: str,
    precision: str,
    time_us: float,
    arithmetic_us: Mapping[str, float],
    mix: Mapping[str, float],
    flags: frozenset[str] | None = None,
) -> PrecisionOutlook:
    """The outlook of a region of ``time_us`` whose arithmetic by kind is ``arithmetic_us`` and whose operator
    time by category is ``mix``, at ``precision`` on a CPU with ``flags`` (default: this machine's)."""
    refused = cpu_lacks(precision, cpu_flags() if flags is None else flags)
    factors = ARITHMETIC_FACTORS.get(precision, {}) if refused is None else {}
    saved = sum(us * (1 - 1 / factors[kind]) for kind, us in arithmetic_us.items() if kind in factors)
    speedup = time_us / (time_us - saved) if time_us > saved > 0 else 1.0
    total = sum(mix.values())
    norm = mix.get("elementwise_norm", 0.0) / total if total > 0 else 0.0
    risk = None
    if norm >= NORM_HEAVY_SHARE:
        risk = (
            f"softmax, normalisation and elementwise operators take {whole_percent(norm)} of its operator time: "
            "likely to fail the task gate"
        )
    return PrecisionOutlook(path, precision, max(1.0, speedup), refused, risk)
