"""This machine's roofs: the best GEMM rate per dtype (``torch.mm``) and the best copy bandwidth (a
large tensor copy), per backend (``cpu``, and ``cuda`` when a GPU is there), measured once and cached.

``ensure_peaks()`` measures what the cache lacks (about a second per backend) and keeps it in
``$AITUNE_CACHE_DIR/calibration`` (else ``~/.cache/aitune/calibration``, created 0700; through the checked
door `aitune.report.cache`, values checked by `checked_peaks`), one file per
machine and backend named by a hash of the processor or device, threads and torch version. A capture
puts them in the document's ``environment.machine_peaks``, where the torch-free readers
(`aitune.report.efficiency`) place each region on the roofline.

A peak is the best of a few repeats, not the median: the roof is what the machine can do, and a
loaded machine measures it low (the source line says the load, as the gain calibration's does).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from aitune.report.cache import read_cached, write_cached
from aitune.suggest.candidates import number_within
from aitune.torch.calibration import _loaded, _processor, cache_dir

MAX_CACHE_BYTES = 4096
REPEATS = 5
GEMM_SIZES = {
    "cpu": {torch.float32: 512, torch.bfloat16: 256},
    "cuda": {torch.float32: 4096, torch.float16: 4096, torch.bfloat16: 4096},
}
"""Square ``torch.mm`` sizes per backend and dtype: large enough that dispatch does not count, small
enough to take a fraction of a second (reduced-precision GEMM on a CPU without matrix units is slow)."""
COPY_BYTES = {"cpu": 64 << 20, "cuda": 1 << 30}
GEMM_FLOPS_PER_S = (1e6, 1e18)
COPY_BYTES_PER_S = (1e6, 1e15)
"""The rates a cached peak may hold, from a slow embedded core to far beyond any accelerator: a figure outside
(5e-324 would print as ``inf%`` of the roof) is no measurement."""
MAX_DTYPES = 8


def backends() -> list[str]:
    """The backends a capture on this process runs on: ``cpu``, and ``cuda`` with a GPU."""
    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


def peaks_file(backend: str) -> Path:
    """The cache file of ``backend``'s peaks on this machine."""
    device = torch.cuda.get_device_name() if backend == "cuda" else _processor()
    facts = {"backend": backend, "device": device, "threads": torch.get_num_threads(), "torch": str(torch.__version__)}
    key = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir() / f"peaks-{backend}-{key}.json"


def ensure_peaks() -> dict[str, dict[str, Any]]:
    """The peaks of every backend of this process (`backends`), measured and cached where the cache has none."""
    return {backend: _cached(backend) or _measure_and_cache(backend) for backend in backends()}


def _cached(backend: str) -> dict[str, Any] | None:
    return read_cached(peaks_file(backend), "a backend's peaks", checked_peaks, MAX_CACHE_BYTES)


def checked_peaks(found: Any) -> dict[str, Any] | None:
    """``found``, read from a cache file, as a backend's peaks, or None when it is not one: every rate a
    finite number within `GEMM_FLOPS_PER_S` or `COPY_BYTES_PER_S`, a few dtypes, a short source line."""
    if not isinstance(found, Mapping):
        return None
    rates, copy, source = (found.get(key) for key in ("gemm_flops_per_s", "copy_bytes_per_s", "source"))
    if not isinstance(rates, Mapping) or not rates or len(rates) > MAX_DTYPES:
        return None
    if not all(isinstance(dtype, str) and len(dtype) <= 32 for dtype in rates):
        return None
    if not all(number_within(rate, *GEMM_FLOPS_PER_S) for rate in rates.values()):
        return None
    if not number_within(copy, *COPY_BYTES_PER_S) or not isinstance(source, str) or len(source) > 200:
        return None
    return {
        "gemm_flops_per_s": {k: float(v) for k, v in rates.items()},
        "copy_bytes_per_s": float(copy),
        "source": source,
    }


def _measure_and_cache(backend: str) -> dict[str, Any]:
    peaks = measure_peaks(backend)
    write_cached(peaks_file(backend), peaks)  # where it cannot be, measured again next time (said once)
    return peaks


def measure_peaks(backend: str) -> dict[str, Any]:
    """``backend``'s best ``torch.mm`` FLOP/s per dtype and best copy bytes/s (read + written)."""
    device = torch.device(backend)
    sync = torch.cuda.synchronize if backend == "cuda" else (lambda: None)
    rates = {}
    with torch.no_grad():
        for dtype, size in GEMM_SIZES[backend].items():
            a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
            rates[str(dtype).removeprefix("torch.")] = 2 * size**3 / best_seconds(lambda a=a, b=b: torch.mm(a, b), sync)
        source = torch.empty(COPY_BYTES[backend] // 4, device=device)
        target = torch.empty_like(source)
        copy = 2 * COPY_BYTES[backend] / best_seconds(lambda: target.copy_(source), sync)
    when = datetime.now(timezone.utc).date().isoformat()
    load = f", load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (peaks read low)" if _loaded() else ""
    threads = f"{torch.get_num_threads()} thread(s)" if backend == "cpu" else torch.cuda.get_device_name()
    return {
        "gemm_flops_per_s": rates,
        "copy_bytes_per_s": copy,
        "source": f"measured {when}: torch {torch.__version__}, {threads}{load}",
    }


def best_seconds(call: Callable[[], object], sync: Callable[[], None], repeats: int = REPEATS) -> float:
    """The shortest of ``repeats`` timed calls (after one untimed), in seconds."""
    call()
    sync()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        sync()
        best = min(best, time.perf_counter() - start)
    return max(best, 1e-9)
