"""Regenerate sample_traces/: real captures of the bundled example app, for the viewer and the tests.

    .venv/bin/python scripts/make_sample_traces.py [--out sample_traces]

Writes ``tuned-pipeline/``, the folder ``aitune-profile tune examples/pipeline_app.py:infer`` writes
(``before/`` and ``after/`` with ``profile.json``, ``profile.md`` and ``trace.json.gz``, then
``suggestions.json``, ``tuning.json``, ``compare.json`` and ``plan.json``), run with
``OMP_NUM_THREADS=1`` and ONNX Runtime as the only backend so that it takes seconds; and a
two-scenario profile (``scenarios-batch``: batch 1 and batch 4 of the eager pipeline, written as
``scenarios-batch.profile.json``, ``.profile.md`` and one gzipped Chrome trace per scenario).
Every trace is gzipped reproducibly with its host name and scratch path redacted.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))

import pipeline_app  # noqa: E402

import aitune.torch as ait  # noqa: E402
from aitune.report import dumps, read_trace  # noqa: E402

TUNED = "tuned-pipeline"
WARMUP_RUNS = 2
MEASURED_RUNS = 6  # enough runs for a median and a spread, few enough to keep the traces small
TUNE = [
    "tune",
    "examples/pipeline_app.py:infer",
    "--input",
    "input_data",
    "--backends",
    "onnxruntime",  # one backend keeps tuning to seconds; Inductor took 15 s here and did not beat eager
    "--warmup",
    str(WARMUP_RUNS),
    "--runs",
    str(MEASURED_RUNS),
]


def tune_sample(out: Path) -> None:
    """Run ``aitune-profile tune`` on the example into a scratch folder and copy its folder in as `TUNED`."""
    # One OpenMP thread: on a shared 2-core machine two threads contending with other jobs stretch runs tenfold.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / TUNED
        command = [sys.executable, "-m", "aitune.cli", *TUNE, "--out", str(folder)]
        subprocess.run(command, cwd=ROOT, env=env, check=True)
        shutil.rmtree(out / TUNED, ignore_errors=True)
        shutil.copytree(folder, out / TUNED)
    for trace in sorted((out / TUNED).rglob("*trace.json.gz")):
        redact_trace(trace)
    print(f"wrote {TUNED}/ (aitune-profile {' '.join(TUNE)})")


def capture_scenarios(out: Path) -> None:
    """Profile the eager pipeline on two batch sizes, one `Scenario` each, and write its files."""
    name = "scenarios-batch"
    pipe = pipeline_app.Pipeline()
    prof = ait.profile(
        obj=pipe,
        input_data=[ait.Scenario("batch1", batch(1)), ait.Scenario("batch4", batch(4))],
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
    out = parser.parse_args().out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    tune_sample(out)
    capture_scenarios(out)


if __name__ == "__main__":
    main()
