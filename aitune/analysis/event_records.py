"""The records of single events the events model keeps beside its operator columns: host-side launches,
device activities, communication spans and memory events, and how a memory event's untrusted args are read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from aitune.analysis.span import ThreadKey


class Launch(NamedTuple):
    """A host-side runtime call (cudaLaunchKernel, cudaMemcpyAsync, cudaStreamSynchronize, …)."""

    name: str
    start_us: float
    duration_us: float
    thread: ThreadKey
    correlation: int


class MemoryEvent(NamedTuple):
    """One allocation (``bytes`` > 0) or free (``bytes`` < 0) the profiler recorded with ``profile_memory``.

    ``device`` names the allocator's device (`memory_device`: ``cpu``, ``cuda:0``); ``allocator_total``
    is the allocator's own count of live bytes after the event (its ``Total Allocated``), None when the
    event does not give one.
    """

    time_us: float
    bytes: int
    allocator_total: int | None
    device: str
    thread: ThreadKey


MEMORY_EVENT_NAME = "[memory]"
"""The name torch's profiler gives its memory instant events (category ``cpu_instant_event``)."""

MEMORY_CATEGORY = "cpu_instant_event"

_DEVICE_TYPES = {0: "cpu", 1: "cuda", 2: "mkldnn", 9: "mps", 12: "meta", 13: "hpu", 20: "xpu", 21: "privateuseone"}
"""c10's DeviceType numbers a memory event's ``Device Type`` gives, by name; others read as ``device_type_<n>``."""

MAX_MEMORY_DEVICES = 16
"""Most distinct devices whose memory events a trace is read for: a machine has a CPU and a few
accelerators; a hostile trace naming thousands cannot grow the document by one entry per name."""

_BYTES_LIMIT = 2**62
"""A memory event's byte counts beyond this are not an allocation's (and would not stay exact in floats)."""


def memory_device(device_type: Any, device_id: Any) -> str | None:
    """The name of the device of a memory event's ``Device Type`` and ``Device Id``, ``cpu`` or ``cuda:0``;
    None when they are not small integers.

    >>> memory_device(0, -1), memory_device(1, 0), memory_device("1", 0)
    ('cpu', 'cuda:0', None)
    """
    if (
        type(device_type) is not int
        or type(device_id) is not int
        or not (0 <= device_type < 256 and -1 <= device_id < 4096)
    ):
        return None
    name = _DEVICE_TYPES.get(device_type, f"device_type_{device_type}")
    return name if device_id < 0 else f"{name}:{device_id}"


def memory_event(time_us: float, thread: ThreadKey, args: Any) -> MemoryEvent | None:
    """The `MemoryEvent` of a ``[memory]`` instant event's ``args`` (untrusted); None when they do not give
    an integer ``Bytes`` and a device: such an event is skipped, never read as zero."""
    if not isinstance(args, Mapping):
        return None
    size, total = args.get("Bytes"), args.get("Total Allocated")
    device = memory_device(args.get("Device Type"), args.get("Device Id", -1))
    if type(size) is not int or abs(size) > _BYTES_LIMIT or device is None:
        return None
    if type(total) is not int or not 0 <= total <= _BYTES_LIMIT:
        total = None
    return MemoryEvent(float(time_us), size, total, device, thread)


class DeviceActivity(NamedTuple):
    """Work that ran on the device, linked to its launch by the correlation id."""

    name: str
    category: str
    start_us: float
    duration_us: float
    correlation: int


class CommunicationSpan(NamedTuple):
    """A CPU-side collective or point-to-point operation (see `aitune.analysis.collectives`) and the bytes it moves."""

    name: str
    start_us: float
    duration_us: float
    thread: ThreadKey
    bytes: int | None  # None when the args carry no usable size
    bytes_from: str | None  # how its args give bytes (collectives.PARAM_COMMS, INPUTS), None when they cannot

    @property
    def end_us(self) -> float:
        return self.start_us + self.duration_us
