"""Regenerate sample_traces/: a before/after pair of real captures of the bundled example app.

    .venv/bin/python scripts/make_sample_traces.py [--out sample_traces]

Each side is written as ``<name>.profile.json``, ``<name>.profile.md`` and ``<name>.trace.json.gz``.
Until the tuning engine (``aitune.torch.Module``) lands, the "after" side is a real change of the
workload — half the denoising steps — and its file names say so; it is not a tuning result.
"""

from __future__ import annotations

import argparse
import gzip
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))

import pipeline_app  # noqa: E402

import aitune.torch as ait  # noqa: E402
from aitune.report import dumps, read_trace  # noqa: E402

WARMUP_RUNS = 2
MEASURED_RUNS = 6  # enough runs for a median and a spread, few enough to keep the traces small


def capture(name: str, pipe: pipeline_app.Pipeline, out: Path) -> None:
    """Profile one pipeline on the example input and write its profile, Markdown and trace."""
    prof = ait.profile(
        obj=pipe,
        input_data=pipeline_app.input_data,
        inference_function=pipe,
        warmup_runs=WARMUP_RUNS,
        measured_runs=MEASURED_RUNS,
        trace_file=out / f"{name}.trace.json.gz",
    )
    redact_trace(out / f"{name}.trace.json.gz")
    prof.save(out / f"{name}.profile.json")
    (out / f"{name}.profile.md").write_text(prof.markdown())
    print(f"wrote {name}.profile.json, {name}.profile.md, {name}.trace.json.gz")


def redact_trace(path: Path) -> None:
    """Drop the machine's host name and scratch path from a committed trace; gzip it reproducibly."""
    trace = read_trace(path)
    trace["host_name"] = "sample"
    trace.pop("traceName", None)
    path.write_bytes(gzip.compress(dumps(trace), mtime=0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "sample_traces", help="output folder")
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    capture("before-eager-4steps", pipeline_app.Pipeline(steps=4), out)
    capture("after-workload-2steps", pipeline_app.Pipeline(steps=2), out)


if __name__ == "__main__":
    main()
