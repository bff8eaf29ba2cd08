"""Hand-built Chrome traces for the torch-free analysis tests: small literal event lists."""

from __future__ import annotations

from typing import Any

from aitune.markers import region_span_name, run_span_name

MAIN = (1, 1)


def span(name: str, start: float, end: float, category: str = "user_annotation", thread=MAIN) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": category,
        "name": name,
        "ts": start,
        "dur": end - start,
        "pid": thread[0],
        "tid": thread[1],
    }


def run(index: int, start: float, end: float, thread=MAIN) -> dict[str, Any]:
    return span(run_span_name(index), start, end, thread=thread)


def region(region_id: str, start: float, end: float, thread=MAIN) -> dict[str, Any]:
    return span(region_span_name(region_id), start, end, thread=thread)


def op(name: str, start: float, end: float, thread=MAIN) -> dict[str, Any]:
    return span(name, start, end, category="cpu_op", thread=thread)


def shaped(name: str, start: float, end: float, dims: list, types: list, concrete: list | None = None) -> dict:
    """An operator with the input shapes torch's profiler records under ``record_shapes=True``."""
    event = op(name, start, end)
    event["args"] = {"Input Dims": dims, "Input type": types, "Concrete Inputs": concrete or [""] * len(dims)}
    return event


def allocation(ts: float, size: int, total: int, thread=MAIN) -> dict[str, Any]:
    """A host ``[memory]`` event as torch's profiler writes it under ``profile_memory=True``: ``size`` bytes
    allocated (freed when negative), ``total`` live on the host after it."""
    args = {"Total Reserved": 2**26, "Total Allocated": total, "Bytes": size, "Addr": 1000 + ts}
    return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": thread[0], "tid": thread[1],
            "ts": ts, "args": {**args, "Device Type": 0, "Device Id": -1}}  # fmt: skip


def launch(start: float, correlation: int, thread=MAIN) -> dict[str, Any]:
    event = span("cudaLaunchKernel", start, start + 1, category="cuda_runtime", thread=thread)
    event["args"] = {"correlation": correlation}
    return event


def kernel(name: str, start: float, duration: float, correlation: int) -> dict[str, Any]:
    event = span(name, start, start + duration, category="kernel", thread=(0, 7))
    event["args"] = {"correlation": correlation}
    return event


def trace(*events: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    return {"traceEvents": list(events), "aitune": metadata}


GENERATE, MODEL, HEAD = "untuned_module:generate", "untuned_module:model", "untuned_module:lm_head"


def decoder_trace(runs=2, model_us=50.0):
    """Runs of 100 µs: ``generate`` from 1 to 99 µs, ``model`` and ``lm_head`` inside it, then a sampling op."""
    events = []
    for index in range(runs):
        start = index * 1000.0
        events += [
            run(index, start, start + 100),
            region(GENERATE, start + 1, start + 99),
            region(MODEL, start + 10, start + 10 + model_us),
            region(HEAD, start + 65, start + 80),
            op("aten::argmax", start + 85, start + 90),  # sampling: generate's own work
        ]
    return trace(*events, config={"measured_runs": runs})
