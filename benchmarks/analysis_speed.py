"""Analysis speed: events per second from a saved Chrome trace to the profile document.

Captures the decoder example once (its trace holds ~10⁵ events), then times, median of N:
reading the gzipped trace (JSON), reading it into the events model, and deriving the document.

    .venv/bin/python benchmarks/analysis_speed.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

import decoder_app

import aitune.torch as ait
from aitune.analysis import read_trace_events
from aitune.report import profile_from_events, read_trace


def seconds(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        trace_path = Path(folder) / "trace.json.gz"
        ait.profile(
            decoder_app.model,
            decoder_app.input_data,
            decoder_app.infer,
            warmup_runs=1,
            measured_runs=5,
            trace_file=trace_path,
        )
        trace = read_trace(trace_path)
        events = read_trace_events(trace)
        count = len(trace["traceEvents"])
        read_s = statistics.median(seconds(lambda: read_trace(trace_path)) for _ in range(options.repeats))
        model_s = statistics.median(seconds(lambda: read_trace_events(trace)) for _ in range(options.repeats))
        analyze_s = statistics.median(seconds(lambda: profile_from_events(events)) for _ in range(options.repeats))
    print(
        f"trace: {count} events ({len(events.ops)} operators, {len(events.regions)} region spans), "
        f"{trace_path.name}, median of {options.repeats}"
    )
    print("| step | seconds | events/s |")
    print("|---|---|---|")
    for step, value in (
        ("gunzip + JSON parse", read_s),
        ("events model", model_s),
        ("attribution + document", analyze_s),
        ("total", read_s + model_s + analyze_s),
    ):
        print(f"| {step} | {value:.3f} | {count / value:,.0f} |")


if __name__ == "__main__":
    main()
