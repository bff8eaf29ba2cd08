"""Regenerate sample_traces/: real captures of the bundled example app, for the viewer and the tests.

    .venv/bin/python scripts/make_sample_traces.py [--out sample_traces]

Writes an eager-vs-tuned pair (``before-eager`` and ``after-tuned``: the same pipeline profiled
before and after ``aitune.torch.tune`` tried ONNX Runtime for each of its modules, min-latency, keeping
eager where ONNX Runtime was not 5% faster) and a two-scenario profile (``scenarios-batch``: batch 1
and batch 4 of the eager pipeline). Each capture is written as
``<name>.profile.json``, ``<name>.profile.md`` and one gzipped Chrome trace per scenario, host names
redacted.
"""

from __future__ import annotations

import argparse
import gzip
import sys
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))

import pipeline_app  # noqa: E402

import aitune.torch as ait  # noqa: E402
from aitune.report import dumps, read_trace  # noqa: E402

WARMUP_RUNS = 2
MEASURED_RUNS = 6  # enough runs for a median and a spread, few enough to keep the traces small
TUNED_MODULES = ["text_encoder", "unet", "vae"]


def capture(name: str, pipe: pipeline_app.Pipeline, input_data: Any, out: Path) -> None:
    """Profile one pipeline on ``input_data`` (one input or a list of `Scenario`) and write its files."""
    prof = ait.profile(
        obj=pipe,
        input_data=input_data,
        inference_function=pipe,
        warmup_runs=WARMUP_RUNS,
        measured_runs=MEASURED_RUNS,
        trace_file=out / f"{name}.trace.json.gz",
    )
    for trace in sorted(out.glob(f"{name}.*trace.json.gz")):
        redact_trace(trace)
    prof.save(out / f"{name}.profile.json")
    (out / f"{name}.profile.md").write_text(prof.markdown())
    print(f"wrote {name}.profile.json, {name}.profile.md and its traces")


def tune_modules(pipe: pipeline_app.Pipeline, input_data: dict[str, torch.Tensor]) -> None:
    """Wrap the pipeline's modules and tune them on the example input: ONNX Runtime where it wins, else eager."""
    ait.wrap(pipe, TUNED_MODULES)
    # One backend keeps the tuning step to seconds; Inductor took 15 s here and did not beat eager.
    strategy = ait.MinLatencyStrategy([ait.OnnxRuntimeBackend()])
    report = ait.tune(pipe, [input_data], strategy=strategy)
    winners = {module["name"]: graph["winner"] for module in report["modules"] for graph in module["graphs"]}
    print(f"tuning winners: {winners}")


def redact_trace(path: Path) -> None:
    """Drop the machine's host name and scratch path from a committed trace; gzip it reproducibly."""
    trace = read_trace(path)
    trace["host_name"] = "sample"
    trace.pop("traceName", None)
    path.write_bytes(gzip.compress(dumps(trace), mtime=0))


def batch(size: int) -> dict[str, torch.Tensor]:
    """Token ids for ``size`` prompts, from a fixed seed."""
    return {"token_ids": torch.randint(0, 1000, (size, 16), generator=torch.Generator().manual_seed(size))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "sample_traces", help="output folder")
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    pipe = pipeline_app.Pipeline()
    capture("before-eager", pipe, pipeline_app.input_data, out)
    tune_modules(pipe, pipeline_app.input_data)
    capture("after-tuned", pipe, pipeline_app.input_data, out)
    scenarios = [ait.Scenario("batch1", batch(1)), ait.Scenario("batch4", batch(4))]
    capture("scenarios-batch", pipeline_app.Pipeline(), scenarios, out)


if __name__ == "__main__":
    main()
