"""What counts as communication in a trace: one table of event names, and the bytes an event's args say it moves.

Names as torch 2.13 writes them: the dispatcher's ``c10d::allreduce_``, ``c10d::broadcast_``,
``c10d::send`` … on the calling thread; gloo's ``gloo:all_reduce`` … spans of the transfer itself,
on gloo's worker thread (or the caller's, for ``send``/``recv``); NCCL's ``nccl:all_reduce``
annotations and ``record_param_comms`` records; and on the device NCCL's kernels. The args are
untrusted: a size that is not a whole number, or a dtype this table does not know, gives no bytes
rather than an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from math import prod
from typing import Any, NamedTuple

PARAM_COMMS = "param_comms"
"""Bytes from ``record_param_comms`` args: the larger of ``In msg nelems`` and ``Out msg nelems`` × ``dtype``'s size."""
INPUTS = "inputs"
"""Bytes from a backend span's inputs, recorded with ``record_shapes=True``: Σ ``Input Dims`` × ``Input type`` size."""


class CommunicationKind(NamedTuple):
    """One kind of communication event, recognised by the prefix of its name."""

    prefix: str
    domain: str  # "cpu" or "device"
    bytes_from: str | None  # PARAM_COMMS, INPUTS, or None when its args carry no usable size


COMMUNICATION_KINDS = (
    CommunicationKind("c10d::", "cpu", None),  # torch.distributed's operators; their inputs carry no dtype
    CommunicationKind("_c10d_functional::", "cpu", None),  # functional collectives (DTensor, torch.compile)
    CommunicationKind("record_param_comms", "cpu", PARAM_COMMS),
    CommunicationKind("gloo:", "cpu", INPUTS),
    CommunicationKind("nccl:", "cpu", INPUTS),
    CommunicationKind("ncclDevKernel_", "device", None),
    CommunicationKind("ncclKernel_", "device", None),
)
"""Every communication event the analysis recognises: the one table that the events model and every analysis read."""

CPU_PREFIXES = tuple(kind.prefix for kind in COMMUNICATION_KINDS if kind.domain == "cpu")
DEVICE_PREFIXES = tuple(kind.prefix for kind in COMMUNICATION_KINDS if kind.domain == "device")

MAX_ELEMENTS = 2**48
"""Sizes at or above this many elements are taken as corrupt: no real message is that large, and the
document's integers must stay within JSON's exact range."""

_DTYPE_BYTES = {
    **dict.fromkeys(("float", "float32", "int", "int32", "unsigned int", "uint32", "complexhalf"), 4),
    **dict.fromkeys(("double", "float64", "long", "long int", "int64", "long long", "uint64", "complexfloat"), 8),
    **dict.fromkeys(("half", "float16", "bfloat16", "short", "short int", "int16", "uint16"), 2),
    **dict.fromkeys(("char", "signed char", "unsigned char", "int8", "uint8", "byte", "bool"), 1),
    **dict.fromkeys(("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"), 1),
    "complexdouble": 16,
    "complex<float>": 8,
    "complex<double>": 16,
    "complex<c10::half>": 4,
}
"""Bytes per element by dtype, in both spellings torch writes: ``Float``/``BFloat16`` (record_param_comms)
and ``float``/``c10::BFloat16`` (recorded input types), compared in lower case without ``c10::``/``torch.``."""


@cache
def communication_kind(name: str) -> CommunicationKind | None:
    """The kind of communication an event name stands for; None when it is not communication."""
    for kind in COMMUNICATION_KINDS:
        if name.startswith(kind.prefix):
            return kind
    return None


def is_communication(name: str) -> bool:
    """Whether an event (CPU operator, annotation or device kernel) is a collective or point-to-point operation."""
    return communication_kind(name) is not None


def message_bytes(bytes_from: str | None, args: Any) -> int | None:
    """The bytes one communication event moves, as its args say (see `PARAM_COMMS`, `INPUTS`); None when unknown."""
    if not isinstance(args, Mapping):
        return None
    if bytes_from == PARAM_COMMS:
        sizes = [_elements(args.get("In msg nelems")), _elements(args.get("Out msg nelems"))]
        known = [size for size in sizes if size is not None]
        width = dtype_bytes(args.get("dtype"))
        return max(known) * width if known and width is not None else None
    if bytes_from == INPUTS:
        dims, types = args.get("Input Dims"), args.get("Input type")
        if not isinstance(dims, list) or not isinstance(types, list):
            return None
        sizes = [_tensor_bytes(shape, dtype) for shape, dtype in zip(dims, types, strict=False)]
        known = [size for size in sizes if size is not None]
        return sum(known) if known else None
    return None


def dtype_bytes(dtype: Any) -> int | None:
    """Bytes per element of a dtype as torch names it (``Float``, ``c10::BFloat16``, ``long int``); None if unknown."""
    if not isinstance(dtype, str):
        return None
    return _DTYPE_BYTES.get(dtype.lower().removeprefix("torch.").removeprefix("c10::"))


def _elements(value: Any) -> int | None:
    """A count of elements when ``value`` is a plausible one (a whole number, not a bool); else None."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < MAX_ELEMENTS:
        return None
    return value


def _tensor_bytes(shape: Any, dtype: Any) -> int | None:
    width = dtype_bytes(dtype)
    if width is None or not isinstance(shape, list) or len(shape) > 64:
        return None
    dims = [_elements(dim) for dim in shape]
    if any(dim is None for dim in dims):
        return None
    elements = prod(dims)  # type: ignore[arg-type]
    return elements * width if elements < MAX_ELEMENTS else None
