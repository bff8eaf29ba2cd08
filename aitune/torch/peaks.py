"""This machine's roofs: the best GEMM rate per dtype (``torch.mm``) and the best copy bandwidth (a
large tensor copy), per backend (``cpu``, and ``cuda`` when a GPU is there), measured once and cached.

``ensure_peaks()`` measures what the cache lacks (about a second per backend) and keeps it in
``$AITUNE_CACHE_DIR/calibration`` (else ``~/.cache/aitune/calibration``, created 0700), one file per
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
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

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


def backends() -> list[str]:
    """The backends a capture on this process runs on: ``cpu``, and ``cuda`` with a GPU."""
    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


def peaks_file(backend: str) -> Path:
    """The cache file of ``backend``'s peaks on this machine."""
    device = torch.cuda.get_device_name() if backend == "cuda" else _processor()
    facts = {"backend": backend, "device": device, "threads": torch.get_num_threads(), "torch": torch.__version__}
    key = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir() / f"peaks-{backend}-{key}.json"


def ensure_peaks() -> dict[str, dict[str, Any]]:
    """The peaks of every backend of this process (`backends`), measured and cached where the cache has none."""
    return {backend: _cached(backend) or _measure_and_cache(backend) for backend in backends()}


def _cached(backend: str) -> dict[str, Any] | None:
    path = peaks_file(backend)
    try:
        if not path.is_file() or path.stat().st_size > MAX_CACHE_BYTES:
            return None
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    rates = found.get("gemm_flops_per_s") if isinstance(found, dict) else None
    if not isinstance(rates, dict) or not all(isinstance(v, float) and v > 0 for v in rates.values()):
        return None
    if not isinstance(found.get("copy_bytes_per_s"), float) or not isinstance(found.get("source"), str):
        return None
    return {"gemm_flops_per_s": rates, "copy_bytes_per_s": found["copy_bytes_per_s"], "source": found["source"]}


def _measure_and_cache(backend: str) -> dict[str, Any]:
    peaks = measure_peaks(backend)
    try:
        folder = cache_dir()
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.chmod(0o700)
        temporary = folder / f".{peaks_file(backend).name}.{os.getpid()}"
        temporary.write_text(json.dumps(peaks), encoding="utf-8")
        temporary.replace(peaks_file(backend))
    except OSError:
        pass  # a cache that cannot be written: measured again next time, the capture goes on
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
