"""What a tuned backend holds beside the original module, measured: the process's resident memory (and, on
a GPU, the device's used memory) before and after the backend built what it keeps.

Measured, never estimated from weights: an ONNX Runtime session keeps its own copy of the weights (a
session of a 16 MiB MLP held 16.8 MB more resident memory, the same again when it was released), a
compiled graph keeps its buffers and code. The garbage a build leaves behind (the exporter's, Inductor's
compile) is not the backend's: freed memory is returned to the system (``malloc_trim``) before each
reading, and a backend that can says where its own allocation starts (`Built.held`). ONNX Runtime's
one-time start-up in a process (about 10 MB of environment and kernel registry) is paid before the first
session is measured (`prime_onnxruntime`); the process figure (`process_rss_bytes` before and after
tuning) counts it, with everything else tuning left in the process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from aitune.torch.backends.onnx_export import hand_built_model

RSS = "process_rss"
"""``measured_by``: resident memory of the process (``/proc/self/statm``), host side."""


@dataclass
class HeldMemory:
    """Bytes a backend's build holds: ``host_bytes`` of the process's resident memory, ``device_bytes`` of the
    GPU's used memory (None off a GPU); None where this system cannot tell (no ``/proc``)."""

    host_bytes: int | None = None
    device_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"host_bytes": self.host_bytes, "device_bytes": self.device_bytes, "measured_by": RSS}


@functools.cache
def _libc() -> Any:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


def process_rss_bytes() -> int | None:
    """The process's resident bytes after a garbage collection and freed heap returned to the system;
    None without ``/proc/self/statm`` (not Linux)."""
    gc.collect()
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def device_used_bytes(device: torch.device) -> int | None:
    """Bytes in use on ``device`` by every allocator (torch's caching one, ONNX Runtime's arena): total minus
    free, after torch's cache is emptied; None off a CUDA device."""
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info(device)
    return total - free


def process_memory(before: int | None, after: int | None) -> dict[str, Any] | None:
    """The ``process_memory`` of a tuning report and plan: resident bytes before and after tuning and what
    tuning left (never below 0); None where the process's memory cannot be read."""
    if before is None or after is None:
        return None
    return {
        "rss_before_bytes": before,
        "rss_after_bytes": after,
        "held_bytes": max(0, after - before),
        "measured_by": RSS,
    }


@contextmanager
def measuring(device: torch.device) -> Iterator[HeldMemory]:
    """The `HeldMemory` of what the block allocated and still holds when it ends (filled in on exit)."""
    held = HeldMemory()
    host, on_device = process_rss_bytes(), device_used_bytes(device)
    yield held
    host_after, device_after = process_rss_bytes(), device_used_bytes(device)
    if host is not None and host_after is not None:
        held.host_bytes = max(0, host_after - host)
    if on_device is not None and device_after is not None:
        held.device_bytes = max(0, device_after - on_device)


@functools.cache
def prime_onnxruntime() -> None:
    """Pay ONNX Runtime's one-time start-up (its environment, the CPU provider's kernel registry) with a
    one-node session, so that the next session's measure holds that session only."""
    import onnxruntime
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "prime",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = hand_built_model(graph, 13)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
    onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
