"""Write the hostile cache corpus under ``caches/`` next to this script: what a per-user cache file
(``$AITUNE_CACHE_DIR/calibration/peaks-*.json``, ``gain-*.json``) can hold once someone, or a failing
disk, has written over it.

Run ``python tests/hostile/make_cache_corpus.py`` from the repository root to regenerate it. Each case is
one file, ``peaks-<case>.json`` put in place of a backend's peaks or ``gain-<case>.json`` in place of the
gain calibration; what git cannot hold (links, owners, modes, a FIFO, a folder in a file's place) is
planted at test time by ``tests/test_hostile_caches.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHES = HERE / "caches"

GOOD_PEAKS = {"gemm_flops_per_s": {"float32": 1.0e11, "bfloat16": 2.0e10}, "copy_bytes_per_s": 2.0e10, "source": "x"}
GOOD_GAIN = {"eager_op_us": 5.0, "tuned_op_us": 0.5, "tuned_call_us": 20.0, "arithmetic": {"conv": 1.4}, "source": "x"}


def _with(base: dict, path: tuple[str, ...], value: object) -> dict:
    edited = json.loads(json.dumps(base))
    *parents, last = path
    holder = edited
    for key in parents:
        holder = holder[key]
    holder[last] = value
    return edited


def _json(value: object) -> bytes:
    return json.dumps(value, allow_nan=True).encode()  # allow_nan: Python writes NaN and Infinity as a cache could


PEAKS_CASES: dict[str, bytes] = {
    "copy-nan": _json(_with(GOOD_PEAKS, ("copy_bytes_per_s",), float("nan"))),
    "copy-infinity": _json(_with(GOOD_PEAKS, ("copy_bytes_per_s",), float("inf"))),
    "copy-negative": _json(_with(GOOD_PEAKS, ("copy_bytes_per_s",), -2.0e10)),
    "copy-zero": _json(_with(GOOD_PEAKS, ("copy_bytes_per_s",), 0.0)),
    "copy-a-string": _json(_with(GOOD_PEAKS, ("copy_bytes_per_s",), "fast")),
    "gemm-subnormal": _json(_with(GOOD_PEAKS, ("gemm_flops_per_s", "float32"), 5e-324)),
    "gemm-nan": _json(_with(GOOD_PEAKS, ("gemm_flops_per_s", "float32"), float("nan"))),
    "gemm-1e300": _json(_with(GOOD_PEAKS, ("gemm_flops_per_s", "float32"), 1e300)),
    "gemm-none": _json(_with(GOOD_PEAKS, ("gemm_flops_per_s",), {})),
    "gemm-a-list": _json(_with(GOOD_PEAKS, ("gemm_flops_per_s",), [1.0e11])),
    "source-huge": _json(_with(GOOD_PEAKS, ("source",), "x" * 300)),
    "not-an-object": b"[1.0e11, 2.0e10]",
    "not-json": b"{gemm: fast",
    "truncated": json.dumps(GOOD_PEAKS).encode()[:40],
    "too-big": _json({**GOOD_PEAKS, "padding": "x" * 8192}),
    "deep": b"[" * 64 + b"]" * 64,
}

GAIN_CASES: dict[str, bytes] = {
    "eager-nan": _json(_with(GOOD_GAIN, ("eager_op_us",), float("nan"))),
    "eager-negative": _json(_with(GOOD_GAIN, ("eager_op_us",), -1.0)),
    "tuned-call-infinity": _json(_with(GOOD_GAIN, ("tuned_call_us",), float("inf"))),
    "arithmetic-1e300": _json(_with(GOOD_GAIN, ("arithmetic", "conv"), 1e300)),
    "arithmetic-unknown-kind": _json(_with(GOOD_GAIN, ("arithmetic",), {"fft": 2.0})),
    "not-json": b"\x00\x01marshal?",
    "too-big": _json({**GOOD_GAIN, "padding": "x" * 20_000}),
}


def corpus() -> dict[str, bytes]:
    """File name under ``caches/`` → bytes of every committed case."""
    return {
        **{f"peaks-{case}.json": data for case, data in PEAKS_CASES.items()},
        **{f"gain-{case}.json": data for case, data in GAIN_CASES.items()},
    }


def main() -> None:
    CACHES.mkdir(exist_ok=True)
    for name, data in corpus().items():
        (CACHES / name).write_bytes(data)


if __name__ == "__main__":
    main()
