"""The gain model's calibration, cached per device: its cache and the probe a capture times.

A service below both capture and tuning: ``aitune.torch.tuning.calibrate`` measures the figures
``aitune.suggest.gain`` needs (a few seconds) on the device in use and hands them to
``ensure_calibration``, which keeps them in ``$AITUNE_CACHE_DIR/calibration`` (else
``~/.cache/aitune/calibration``, created 0700; read and written through the checked door
`aitune.report.cache`), one file per device (`device_id`: ``cpu:<processor>`` or ``cuda:<device name>``),
machine and versions; a CPU calibration is never read for a CUDA capture.
``cached_calibration()`` only reads the cache: ``aitune.torch.performance.environment`` puts it in
every captured profile's ``environment.gain_calibration``, so that suggest, which never runs torch,
predicts with this device's figures. `DispatchProbe` is the eager chain the capture times between its
runs, on the same device, so the gain model can scale the figures to the machine's speed then.

This module imports neither ``aitune.torch.performance`` nor ``aitune.torch.tuning``.

A calibration measured on a machine busier than its cores (load average) says so, and is measured
again by the first ``ensure_calibration()`` that finds the machine quiet.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from aitune.cpuinfo import cpu_model
from aitune.report.cache import cache_root, read_cached, write_cached
from aitune.suggest.gain import Calibration

logger = logging.getLogger(__name__)

MAX_CACHE_BYTES = 16_384
LOADED_SUFFIX = " (a loaded machine: measured again once it is quiet)"
TINY = 16  # features of the dispatch chain: arithmetic negligible
METHOD = 6
"""What ``aitune.torch.tuning.calibrate`` measures, part of the cache key: raised whenever a figure is measured
differently, so a calibration cached by an earlier method is measured again (2: the convolution as a conv →
batch norm → ReLU block; 3: ``stateful_call_us``; 4: the recurrent kind; 5: the convolution as a residual
block; 6: measured on the device in use, and the calibration names it)."""


def capture_device() -> torch.device:
    """The device a capture in this process times: CUDA's when there is one (the capture then records
    device time), else the CPU. The calibration is measured on, and cached for, this one."""
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def device_id(device: torch.device) -> str:
    """The device a calibration was measured on, as its document records it: ``cpu:<processor>`` or
    ``<type>:<device name>`` (``cuda:NVIDIA H100 80GB HBM3``)."""
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(device)}"
    return f"{device.type}:{_processor() or platform.machine()}"


def cache_dir() -> Path:
    """``$AITUNE_CACHE_DIR/calibration``, else ``~/.cache/aitune/calibration``."""
    return cache_root() / "calibration"


def cache_file(device: torch.device | None = None) -> Path:
    """The cache file of ``device``'s calibration (`capture_device` by default): named by a hash of the
    device (`device_id`), the machine's core count, threads, versions and `METHOD`."""
    facts = {
        "method": METHOD,
        "machine": platform.machine(),
        "device": device_id(device or capture_device()),
        "cpus": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "torch": str(torch.__version__),  # a str subclass (TorchVersion) msgspec will not encode
        "onnxruntime": _version("onnxruntime"),
    }
    key = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir() / f"gain-{key}.json"


def cached_calibration(device: torch.device | None = None) -> Calibration | None:
    """``device``'s cached calibration (`capture_device` by default), or None (none yet, or a file not to
    trust, said once: see `aitune.report.cache`): never measures."""
    return read_cached(cache_file(device), "a calibration", Calibration.from_dict, MAX_CACHE_BYTES)


def ensure_calibration(
    measure: Callable[[torch.device], Calibration], device: torch.device | None = None
) -> Calibration | None:
    """``device``'s cached calibration (`capture_device` by default), measured by ``measure`` and cached first
    when there is none (or it was measured on a loaded machine and this one is quiet now); None where ONNX
    Runtime or onnx is missing or the measuring fails (the gain model then uses its fallback table; a
    warning says why). ``measure`` is the tuning layer's (``aitune.torch.tuning.calibrate.calibrate``)."""
    device = device or capture_device()
    found = cached_calibration(device)
    if found is not None and (not found.source.endswith(LOADED_SUFFIX) or _loaded()):
        return found
    if _version("onnxruntime") is None or _version("onnx") is None:
        return found
    try:
        calibration = measure(device)
    except Exception as error:  # a figure for the forecast: its failure must not stop the capture or the tuning
        logger.warning("aitune: the gain model's calibration failed (%s); suggest predicts without it", error)
        return found
    write_cached(cache_file(device), calibration.to_dict())  # where it cannot be, measured again next time (said once)
    return calibration


class DispatchProbe:
    """The eager chain ``eager_op_us`` is calibrated on (25 blocks of linear, add, layer_norm and relu on a
    1 × `TINY` tensor: dispatch, no arithmetic) on ``device``, timed once per call: µs per operator at
    that moment (on CUDA, up to a synchronisation after the chain: launches, not kernels, decide it).

    A capture times it after each measured run (`capture_eager_op_us` in the profile's environment), on
    the device the calibration is of, so the gain model can scale the cached calibration's µs figures to
    the machine's speed during the runs it predicts from: a shared machine's speed drifts by tens of
    percent over minutes."""

    BLOCKS = 25

    def __init__(self, device: torch.device | None = None) -> None:
        self.device = device or capture_device()
        self._x = torch.randn(1, TINY, device=self.device)
        self._layer, self._norm = nn.Linear(TINY, TINY).to(self.device), nn.LayerNorm(TINY).to(self.device)

    def chain(self) -> None:
        h = self._x
        for _ in range(self.BLOCKS):
            h = torch.relu(self._norm(self._layer(h) + self._x))
        synchronize(self.device)

    def __call__(self) -> float:
        with torch.no_grad():
            synchronize(self.device)
            start = time.perf_counter_ns()
            self.chain()
            return (time.perf_counter_ns() - start) / 1000 / (4 * self.BLOCKS)


def synchronize(device: torch.device) -> None:
    """Wait for ``device``'s queued work (CUDA's), so a clock read after it covers that work; none on the CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _loaded() -> bool:
    """More runnable processes than cores over the last minute: timings then measure the queue."""
    return hasattr(os, "getloadavg") and os.getloadavg()[0] > (os.cpu_count() or 1)


def _processor() -> str:
    return cpu_model() or platform.processor()


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None
