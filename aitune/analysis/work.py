"""The work of one operator: floating-point operations and bytes moved, from its name and the input
shapes the profiler recorded (``record_shapes``: the trace's ``Input Dims``, ``Input type`` and
``Concrete Inputs``). No torch: the formulas are torch's (``torch.utils.flop_counter``), written again.

FLOPs count a multiply and an add as two, and only the products, as torch's counter does (no bias,
no softmax): ``2·M·K·N`` for a matrix product, ``2·batch·out-pixels·prod(weight)`` for a
convolution, ``2·b·h·s_q·s_k·(d_q + d_v)`` for attention. Bytes are the compulsory traffic: every
tensor input read once and the output written once (an attention's scores never reach memory).

Only the operators in `COUNTED` have a formula. Every other operator's time is *uncounted*, never
zero work: readers say how much of a region's time that is. A counted name whose recorded inputs
cannot be read (no shapes, an unknown dtype, a malformed entry) gives None, uncounted as well.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

MAX_RANK = 8
"""Most dimensions an input may have to be counted: beyond it the entry is not a tensor we know."""

DTYPE_BYTES = {
    "float": ("float32", 4),
    "double": ("float64", 8),
    "c10::Half": ("float16", 2),
    "c10::BFloat16": ("bfloat16", 2),
    "c10::Float8_e4m3fn": ("float8_e4m3fn", 1),
    "c10::Float8_e5m2": ("float8_e5m2", 1),
    "signed char": ("int8", 1),
    "unsigned char": ("uint8", 1),
    "short int": ("int16", 2),
    "int": ("int32", 4),
    "long int": ("int64", 8),
    "bool": ("bool", 1),
}
"""The profiler's ``Input type`` names: the dtype's name (as torch prints it) and its size in bytes."""


class OpInputs(NamedTuple):
    """What the profiler recorded of one operator's inputs: per input, its dims (None for a non-tensor),
    its type name, and its concrete value as text (scalars and lists: ``"[1, 1]"``, ``"False"``)."""

    dims: tuple[tuple[int, ...] | None, ...]
    types: tuple[str, ...]
    concrete: tuple[str, ...]


class OpWork(NamedTuple):
    """One operator's floating-point operations, bytes moved, and the dtype its FLOPs ran in."""

    flops: int
    bytes: int
    dtype: str


def operator_inputs(args: Any) -> OpInputs | None:
    """The `OpInputs` of an event's ``args`` (untrusted), or None when it holds no readable shapes."""
    if not isinstance(args, dict):
        return None
    dims, types, concrete = args.get("Input Dims"), args.get("Input type"), args.get("Concrete Inputs", ())
    if not isinstance(dims, list) or not isinstance(types, list) or not isinstance(concrete, list):
        return None
    shapes = tuple(_shape(entry) for entry in dims)
    names = tuple(entry if isinstance(entry, str) else "" for entry in types)
    values = tuple(entry if isinstance(entry, str) else "" for entry in concrete)
    return OpInputs(shapes, names, values)


def _shape(entry: Any) -> tuple[int, ...] | None:
    if not isinstance(entry, list) or len(entry) > MAX_RANK:
        return None
    if not all(type(size) is int and size >= 0 for size in entry):
        return None
    return tuple(entry)


def operator_work(name: str, inputs: OpInputs | None) -> OpWork | None:
    """The work of operator ``name`` with ``inputs``; None when it has no formula or its inputs cannot be read."""
    formula = _FORMULAS.get(name)
    if formula is None or inputs is None:
        return None
    try:
        return formula(inputs)
    except (IndexError, ValueError, ZeroDivisionError):
        return None


def _tensor(inputs: OpInputs, index: int) -> tuple[tuple[int, ...], str, int]:
    """Input ``index`` as (shape, dtype name, element size); `ValueError` when it is not a known tensor."""
    shape = inputs.dims[index]
    known = DTYPE_BYTES.get(inputs.types[index])
    if shape is None or known is None:
        raise ValueError(f"input {index} is not a tensor")
    return shape, known[0], known[1]


def _optional_bytes(inputs: OpInputs, index: int) -> int:
    """Bytes of input ``index`` when it is a tensor (a bias, a mask), else 0."""
    if index >= len(inputs.dims) or inputs.dims[index] is None or inputs.types[index] not in DTYPE_BYTES:
        return 0
    return math.prod(inputs.dims[index]) * DTYPE_BYTES[inputs.types[index]][1]  # type: ignore[arg-type]


def _work(flops: int, out: Sequence[int], inputs: OpInputs, tensors: Sequence[int], optional: Sequence[int]) -> OpWork:
    """`OpWork` of ``flops`` reading the ``tensors`` (and ``optional`` ones) of ``inputs`` and writing ``out``."""
    _, dtype, size = _tensor(inputs, tensors[0])
    read = sum(math.prod(_tensor(inputs, index)[0]) * _tensor(inputs, index)[2] for index in tensors)
    read += sum(_optional_bytes(inputs, index) for index in optional)
    return OpWork(flops, read + math.prod(out) * size, dtype)


def _mm(a: int, b: int, optional: Sequence[int] = ()) -> Any:
    def formula(inputs: OpInputs) -> OpWork:
        (m, k), (k2, n) = _tensor(inputs, a)[0], _tensor(inputs, b)[0]
        _same(k, k2)
        return _work(2 * m * k * n, (m, n), inputs, (a, b), optional)

    return formula


def _bmm(a: int, b: int, optional: Sequence[int] = ()) -> Any:
    def formula(inputs: OpInputs) -> OpWork:
        (batch, m, k), (batch2, k2, n) = _tensor(inputs, a)[0], _tensor(inputs, b)[0]
        _same(k, k2)
        _same(batch, batch2)
        return _work(2 * batch * m * k * n, (batch, m, n), inputs, (a, b), optional)

    return formula


def _linear(inputs: OpInputs) -> OpWork:
    x, w = _tensor(inputs, 0)[0], _tensor(inputs, 1)[0]
    n, k = w
    _same(x[-1], k)
    rows = math.prod(x[:-1])
    return _work(2 * rows * k * n, (*x[:-1], n), inputs, (0, 1), (2,))


def _matmul(inputs: OpInputs) -> OpWork:
    """torch.matmul's shapes: vectors promoted (and their dimension dropped again), batches broadcast."""
    a, b = _tensor(inputs, 0)[0], _tensor(inputs, 1)[0]
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    (m, k), (k2, n) = a2[-2:], b2[-2:]
    _same(k, k2)
    batch = _broadcast(a2[:-2], b2[:-2])
    out = (*batch, *((m,) if len(a) > 1 else ()), *((n,) if len(b) > 1 else ()))
    return _work(2 * math.prod(batch) * m * k * n, out, inputs, (0, 1), ())


def _broadcast(first: Sequence[int], second: Sequence[int]) -> tuple[int, ...]:
    width = max(len(first), len(second))
    padded = [(1,) * (width - len(shape)) + tuple(shape) for shape in (first, second)]
    result = []
    for one, other in zip(*padded, strict=True):
        if one != other and 1 not in (one, other):
            raise ValueError("shapes do not broadcast")
        result.append(max(one, other))
    return tuple(result)


def _same(one: int, other: int) -> None:
    if one != other:
        raise ValueError("inner dimensions differ")


_INTS = re.compile(r"^\[\s*(-?\d+(?:\s*,\s*-?\d+)*)?\s*\]$|^(-?\d+)$")


def _ints(text: str, rank: int) -> tuple[int, ...]:
    """A concrete list (``"[1, 2]"``) or scalar (``"1"``, repeated to ``rank``) of integers; `ValueError` otherwise."""
    found = _INTS.match(text.strip())
    if found is None:
        raise ValueError(f"not integers: {text[:40]!r}")
    if found.group(2) is not None:
        return (int(found.group(2)),) * rank
    values = tuple(int(value) for value in (found.group(1) or "").split(",") if value.strip())
    return values * rank if len(values) == 1 else values


def _conv(stride: int, padding: int, dilation: int, transposed: int | bool, output_padding: int | None) -> Any:
    """A convolution formula, given the positions of its concrete arguments (``transposed`` a position,
    or the fixed answer for the ``convNd``/``conv_transposeNd`` names)."""

    def formula(inputs: OpInputs) -> OpWork:
        x, w = _tensor(inputs, 0)[0], _tensor(inputs, 1)[0]
        spatial = len(x) - 2
        is_transposed = transposed if isinstance(transposed, bool) else inputs.concrete[transposed] == "True"
        strides, dilations = _ints(inputs.concrete[stride], spatial), _ints(inputs.concrete[dilation], spatial)
        pad_text = inputs.concrete[padding]
        kernel = w[2:]
        if is_transposed:
            extra = _ints(inputs.concrete[output_padding], spatial) if output_padding is not None else (0,) * spatial
            pads = _ints(pad_text, spatial)
            sizes = [
                (size - 1) * s - 2 * p + d * (k - 1) + e + 1
                for size, s, p, d, k, e in zip(x[2:], strides, pads, dilations, kernel, extra, strict=True)
            ]
            groups = x[1] // w[0] if w[0] else 1
            out = (x[0], w[1] * groups, *sizes)
            flops = 2 * x[0] * math.prod(x[2:]) * math.prod(w)
        else:
            pads = _padding(pad_text, spatial, kernel, dilations)
            sizes = [
                (size + 2 * p - d * (k - 1) - 1) // s + 1
                for size, s, p, d, k in zip(x[2:], strides, pads, dilations, kernel, strict=True)
            ]
            out = (x[0], w[0], *sizes)
            flops = 2 * x[0] * math.prod(sizes) * math.prod(w)
        return _work(flops, out, inputs, (0, 1), (2,))

    return formula


def _padding(text: str, rank: int, kernel: Sequence[int], dilations: Sequence[int]) -> tuple[int, ...]:
    """Numeric padding, or the string forms (``valid``: none; ``same``: the output keeps the input's size)."""
    if text.strip() == "valid":
        return (0,) * rank
    if text.strip() == "same":  # stride 1 only: pad so that size + 2p - d(k-1) - 1 + 1 = size
        return tuple(d * (k - 1) // 2 for d, k in zip(dilations, kernel, strict=True))
    return _ints(text, rank)


def _attention(layout: str) -> Any:
    """An attention formula: ``bhsd`` for (batch…, heads, sequence, dim) inputs, ``bshd`` for the
    flash/efficient kernels' (batch, sequence, heads, dim)."""

    def formula(inputs: OpInputs) -> OpWork:
        q, k, v = (_tensor(inputs, index)[0] for index in range(3))
        if layout == "bshd":
            q, k, v = ((s[0], s[2], s[1], s[3]) for s in (q, k, v))
        batch, s_q, d_q, s_k, d_v = math.prod(q[:-2]), q[-2], q[-1], k[-2], v[-1]
        _same(d_q, k[-1])
        _same(s_k, v[-2])
        out = (*q[:-1], d_v) if layout == "bhsd" else (q[0], q[2], q[1], d_v)
        return _work(2 * batch * s_q * s_k * (d_q + d_v), out, inputs, (0, 1, 2), (3,))

    return formula


_FORMULAS: dict[str, Any] = {
    "aten::mm": _mm(0, 1),
    "aten::addmm": _mm(1, 2, (0,)),
    "aten::_addmm_activation": _mm(1, 2, (0,)),
    "aten::bmm": _bmm(0, 1),
    "aten::baddbmm": _bmm(1, 2, (0,)),
    "aten::linear": _linear,
    "aten::matmul": _matmul,
    **{f"aten::conv{n}d": _conv(3, 4, 5, False, None) for n in (1, 2, 3)},
    **{f"aten::conv_transpose{n}d": _conv(3, 4, 7, True, 5) for n in (1, 2, 3)},
    "aten::convolution": _conv(3, 4, 5, 6, 7),
    "aten::_convolution": _conv(3, 4, 5, 6, 7),
    **{
        f"aten::{name}": _attention("bhsd")
        for name in (
            "scaled_dot_product_attention",
            "_scaled_dot_product_attention_math",
            "_scaled_dot_product_flash_attention",
            "_scaled_dot_product_flash_attention_for_cpu",
            "_scaled_dot_product_efficient_attention",
            "_scaled_dot_product_cudnn_attention",
            "_scaled_dot_product_fused_attention_overrideable",
        )
    },
    "aten::_flash_attention_forward": _attention("bshd"),
    "aten::_efficient_attention_forward": _attention("bshd"),
}

COUNTED = frozenset(_FORMULAS)
"""The operator names with a formula: the matrix products, convolutions and attention that dominate inference."""
