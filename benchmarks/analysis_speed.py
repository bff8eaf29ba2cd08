"""Analysis speed: events per second from a saved Chrome trace to the profile document.

Captures the decoder example once (20 measured runs: a gzipped trace of ~2.6 × 10⁵ events), then
times, median of N: gunzip; the typed read of the JSON into the events model (`aitune.analysis.trace_json`,
the path ``analyze`` takes) and, beside it, the general reader's (a dict per event, then the model);
deriving the document; and ``aitune-profile analyze``'s whole path (`aitune.cli.outputs.analyze_trace`:
read, model and document in one call, as the command runs them). Target: ≥ 500,000 events/s end to end.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/analysis_speed.py [--repeats 5] [--runs 20] [--trace saved.json.gz]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

from aitune.analysis import read_trace_events
from aitune.analysis.trace_json import trace_events_from_json
from aitune.cli.outputs import analyze_trace
from aitune.report import profile_from_events, read_trace, read_trace_file_events
from aitune.report.io import parse_json, unpacked


def seconds(call, *args) -> tuple[float, float]:
    """(wall, CPU) seconds of one call: on a shared machine the CPU time is the steadier figure."""
    return timed(call, *args)[0]


def timed(call, *args) -> tuple[tuple[float, float], object]:
    """`seconds` of one call, and what it returned."""
    start, start_cpu = time.perf_counter(), time.process_time()
    result = call(*args)
    return (time.perf_counter() - start, time.process_time() - start_cpu), result


def captured_trace(folder: str, runs: int) -> Path:
    import decoder_app
    import torch

    import aitune.torch as ait

    torch.set_num_threads(1)
    trace_path = Path(folder) / "trace.json.gz"
    ait.profile(
        decoder_app.model,
        decoder_app.input_data,
        decoder_app.infer,
        warmup_runs=1,
        measured_runs=runs,
        operator_runs="all",  # every run traced: the default traces two, and this measures a large trace
        trace_file=trace_path,
    )
    return trace_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--runs", type=int, default=20, help="measured runs of the captured decoder")
    parser.add_argument("--trace", type=Path, help="time this saved trace instead of capturing one")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        trace_path = options.trace or captured_trace(folder, options.runs)
        count = len(read_trace(trace_path)["traceEvents"])
        model = read_trace_file_events(trace_path)
        operators, region_spans = len(model.ops), len(model.regions)
        del model
        packed = trace_path.read_bytes()
        data = unpacked(packed, trace_path.name)

        def parse(json: bytes) -> object:
            return parse_json(json, trace_path.name)

        timings = {
            "gunzip": [],
            "typed read into the events model": [],
            "general read (dict per event) into the events model": [],
            "attribution + document": [],
            "`analyze` end to end": [],
        }
        for _ in range(options.repeats):  # interleaved, so load drift hits every step alike
            timings["gunzip"].append(seconds(unpacked, packed, trace_path.name))
            # The document step reads this repeat's model: a model held across repeats makes every
            # step slower (a heap twice the size), which no run of `analyze` pays.
            read_seconds, events = timed(trace_events_from_json, data, trace_path.name, parse)
            timings["typed read into the events model"].append(read_seconds)
            timings["general read (dict per event) into the events model"].append(
                seconds(lambda: read_trace_events(parse(data)))
            )
            timings["attribution + document"].append(seconds(profile_from_events, events))
            del events
            timings["`analyze` end to end"].append(seconds(analyze_trace, trace_path))
        size_mb = trace_path.stat().st_size / 2**20
    print(
        f"trace: {count:,} events ({operators:,} operators, {region_spans:,} region spans), "
        f"{size_mb:.1f} MB gzipped; median (range) of {options.repeats}; load average {os.getloadavg()[0]:.2f}"
    )
    print("| step | wall s | range | events/s | CPU s | events per CPU s |")
    print("|---|---|---|---|---|---|")
    for step, pairs in timings.items():
        walls, cpus = [wall for wall, _ in pairs], [cpu for _, cpu in pairs]
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        print(
            f"| {step} | {wall:.3f} | {min(walls):.3f}–{max(walls):.3f} | {count / wall:,.0f} | "
            f"{cpu:.3f} | {count / cpu:,.0f} |"
        )


if __name__ == "__main__":
    main()
