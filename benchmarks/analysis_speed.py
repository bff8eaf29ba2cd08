"""Analysis speed: MB of trace JSON per second from a saved Chrome trace to the profile document.

By default it writes a synthetic aitune trace of at least ``--mb`` MB (60) of JSON into a temporary
folder — deterministic: the same bytes on every machine, laid out as torch's exporter lays out a
decoder's operators (nested ``cpu_op`` events with their args, inside region spans inside run spans)
— then times, median of N: gunzip (for a gzipped ``--trace``); the typed read of the JSON into the
events model (`aitune.analysis.trace_json`, the path ``analyze`` takes) and, beside it, the general
reader's (a dict per event, then the model); deriving the document; and ``aitune-profile analyze``'s
whole path (`aitune.cli.outputs.analyze_trace`), as MB of JSON per second. Then, in a process of its
own, the peak memory ``analyze`` allocates (`tracemalloc`) ÷ the JSON's size. Targets:
≥ 90 MB/s end to end on one core; peak ≤ 2× the file. ``--quick``: 3 repeats.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/analysis_speed.py [--quick] [--repeats 5] [--mb 60]
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/analysis_speed.py --trace saved.json.gz
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # builders: the tests' trace events

from builders import region, run

from aitune.analysis import read_trace_events
from aitune.analysis.trace_json import trace_events_from_json
from aitune.cli.outputs import analyze_trace
from aitune.report import profile_from_events, read_trace, read_trace_file_events
from aitune.report.io import parse_json, unpacked

ROOT = Path(__file__).resolve().parent.parent


def seconds(call, *args) -> tuple[float, float]:
    """(wall, CPU) seconds of one call: on a shared machine the CPU time is the steadier figure."""
    return timed(call, *args)[0]


def timed(call, *args) -> tuple[tuple[float, float], object]:
    """`seconds` of one call, and what it returned."""
    start, start_cpu = time.perf_counter(), time.process_time()
    result = call(*args)
    return (time.perf_counter() - start, time.process_time() - start_cpu), result


LAYERS = 12
OPS_PER_LAYER = 24
_OPS = ("aten::linear", "aten::addmm", "aten::view", "aten::add", "aten::layer_norm", "aten::softmax")


def synthetic_trace(folder: str, megabytes: float) -> Path:
    """A trace of at least ``megabytes`` MB of JSON, written event by event: runs of ``LAYERS`` region
    spans, each holding ``OPS_PER_LAYER`` operators (every other one with a child) with torch's args."""
    path = Path(folder) / "synthetic.json"
    regions = [{"id": f"untuned_module:layers.{layer}", "name": f"layers.{layer}"} for layer in range(LAYERS)]
    metadata = {"config": {"warmup_runs": 0, "measured_runs": 0, "operator_runs": "all"}, "regions": regions}
    written, index, correlation = 0, 0, 0
    with path.open("w") as out:
        out.write('{"schemaVersion": 1, "traceEvents": [\n')
        while written < megabytes * 2**20:
            start = index * 10_000.0
            events = [run(index, start, start + 9_000)]
            for layer in range(LAYERS):
                layer_start = start + 10 + layer * 700
                events.append(region(regions[layer]["id"], layer_start, layer_start + 690))
                for position in range(OPS_PER_LAYER):
                    op_start = layer_start + 5 + position * 28
                    correlation += 1
                    events.append(_operator(_OPS[position % len(_OPS)], op_start, 20.0, correlation))
                    if position % 2 == 0:
                        correlation += 1
                        events.append(_operator("aten::empty", op_start + 1, 4.0, correlation))
            text = "".join(f"{json.dumps(event)},\n" for event in events)
            out.write(text)
            written += len(text)
            index += 1
        metadata["config"]["measured_runs"] = index
        out.write(json.dumps(run(index, index * 10_000.0, index * 10_000.0 + 1)).replace("run::", "idle::"))
        out.write(f'\n], "aitune": {json.dumps(metadata)}}}\n')
    return path


def _operator(name: str, start: float, duration: float, correlation: int) -> dict:
    """An operator as torch's exporter writes it (ids and sequence numbers among its args)."""
    return {
        "ph": "X",
        "cat": "cpu_op",
        "name": name,
        "pid": 4242,
        "tid": 4242,
        "ts": round(start, 3),
        "dur": duration,
        "args": {
            "External id": correlation,
            "Record function id": 0,
            "Sequence number": correlation,
            "Ev Idx": correlation,
        },
    }


PEAK = """
import sys, tracemalloc
from pathlib import Path
from aitune.cli.outputs import analyze_trace
tracemalloc.start()
analyze_trace(Path(sys.argv[1]))
print(tracemalloc.get_traced_memory()[1])
"""


def peak_bytes(trace_path: Path) -> int:
    """The memory ``analyze`` holds at its peak (`tracemalloc`: Python's allocations, numpy's and msgspec's
    included), beyond its imports, in a process of its own: a resident-set high-water mark would include
    the imports' own transient peak."""
    result = subprocess.run(
        [sys.executable, "-c", PEAK, str(trace_path)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return int(result.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=None, help="5 (3 with --quick)")
    parser.add_argument("--mb", type=float, default=60.0, help="MB of JSON in the synthetic trace (at least 50)")
    parser.add_argument("--quick", action="store_true", help="3 repeats")
    parser.add_argument("--trace", type=Path, help="time this saved trace instead of a synthetic one")
    options = parser.parse_args()
    options.repeats = options.repeats or (3 if options.quick else 5)
    with tempfile.TemporaryDirectory() as folder:
        trace_path = options.trace or synthetic_trace(folder, options.mb)
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
            read_seconds, events = timed(trace_events_from_json, lambda: data, trace_path.name, parse)
            timings["typed read into the events model"].append(read_seconds)
            timings["general read (dict per event) into the events model"].append(
                seconds(lambda: read_trace_events(parse(data)))
            )
            timings["attribution + document"].append(seconds(profile_from_events, events))
            del events
            timings["`analyze` end to end"].append(seconds(analyze_trace, trace_path))
        size_mb, json_mb = trace_path.stat().st_size / 2**20, len(data) / 2**20
        peak = peak_bytes(trace_path)
    print(
        f"trace: {count:,} events ({operators:,} operators, {region_spans:,} region spans), {json_mb:.1f} MB of "
        f"JSON ({size_mb:.1f} MB on disk); median (range) of {options.repeats}; load average {os.getloadavg()[0]:.2f}"
    )
    print("| step | wall s | range | events/s | MB of JSON/s | CPU s | MB of JSON per CPU s |")
    print("|---|---|---|---|---|---|---|")
    for step, pairs in timings.items():
        walls, cpus = [wall for wall, _ in pairs], [cpu for _, cpu in pairs]
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        print(
            f"| {step} | {wall:.3f} | {min(walls):.3f}–{max(walls):.3f} | {count / wall:,.0f} | "
            f"{json_mb / wall:.1f} | {cpu:.3f} | {json_mb / cpu:.1f} |"
        )
    print(f"peak memory of `analyze` (tracemalloc): {peak / 2**20:.0f} MB, {peak / len(data):.2f}× the JSON")


if __name__ == "__main__":
    main()
