"""Whether this machine runs a reduced precision fast, and why not: the CPU's instruction sets and torch's kernels.

bf16 on a CPU needs bf16 arithmetic in hardware (``amx_bf16`` or ``avx512_bf16``) and oneDNN's bf16
kernels (``torch.ops.mkldnn._is_mkldnn_bf16_supported``); without them every bf16 operation is
emulated and slower than fp32, so the level is refused rather than tried. int8 dynamic quantization
runs on the CPU through a quantized engine (fbgemm/x86 needs AVX2 at least; VNNI or AMX make it fast).
On a GPU, bf16 needs ``torch.cuda.is_bf16_supported()``; int8 dynamic quantization is CPU-only.
"""

from __future__ import annotations

import platform

import torch

from aitune.cpuinfo import cpu_flags
from aitune.suggest.precision import cpu_lacks


def precision_unavailable(precision: str, device: torch.device | str = "cpu") -> str | None:
    """One sentence saying why ``precision`` would not run fast on ``device`` here, or None when it would."""
    device = torch.device(device)
    if precision == "fp32":
        return None
    if device.type == "cuda":
        if precision == "bf16" and not torch.cuda.is_bf16_supported():
            return "this GPU has no bfloat16 arithmetic (torch.cuda.is_bf16_supported() is False)"
        if precision == "int8":
            return "dynamic int8 quantization runs on the CPU only; tune on the CPU or use bf16 on the GPU"
        return None
    if device.type != "cpu":
        return f"reduced precision is not supported on {device.type} devices by aitune yet"
    return _bf16_on_cpu() if precision == "bf16" else _int8_on_cpu()


def _bf16_on_cpu() -> str | None:
    lacking = cpu_lacks("bf16", cpu_flags())
    if lacking is not None:
        return lacking
    if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        return "torch's oneDNN bf16 kernels are not available in this build (mkldnn bf16 support is false)"
    return None


def _int8_on_cpu() -> str | None:
    engines = set(torch.backends.quantized.supported_engines) - {"none"}
    if not engines:
        return "this torch build has no quantized engine (fbgemm, x86, onednn or qnnpack) for int8"
    return cpu_lacks("int8", cpu_flags(), x86=platform.machine().lower() in ("x86_64", "amd64"))
