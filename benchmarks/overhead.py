"""Capture overhead as ratios measured in one process.

By default (issue 41's measure): the whole ``profile()`` call — what a user waits for — against the
plain calls it measures (``--runs``, 8), on a DDPM-like diffusers pipeline and a GPT-2-like
``generate`` (`benchmarks/zoo/ddpm.py`, `gpt2_generate.py`), for the default capture and a lite one,
with each capture's run ratio (its median measured run ÷ the median of the plain batch just before
it). Plain batches and captures are interleaved, mode by mode within each repeat; each figure is the
median over repeats with its range. Targets: whole call ≤ 1.25 (DDPM-like) and ≤ 1.8 (GPT-2-like)
with the default capture, ≤ 1.1 lite; run ratios ≤ 1.02. ``--quick``: 3 repeats (under 2 minutes).
Beside them, the profiler's floor: the same plain calls and one more inside a bare ``torch.profiler``
session recording shapes and memory, as the default capture's operator run does, ÷ the plain calls
(torch's own cost of that run, before anything reads its events).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/overhead.py [--quick] [--repeats 7] [--warmup 0]

``--examples`` measures instead, on the bundled examples and two tiny Hugging Face workloads:
(a) median wall of a measured run under capture ÷ median wall of the same call uninstrumented, in
    the batch of plain calls just before it (per repeat: the machine drifts between repeats); and
    beside it the same plain calls inside a bare torch.profiler session (no aitune): the profiler's
    own cost, the floor of a traced run's (a);
(b) the whole ``profile()`` call's wall ÷ the plain time of the runs it performed (warmups, the
    stamps' or profiler's warmup, measured runs, and the profiler's warmup and operator runs if any);
(c) the post-run cost of a full capture: everything after its last run returns (stopping the
    profiler, reading its events, the analysis) in µs per event read into the events model, with
    the read and the analysis also alone (the rest is torch ending the session).
Three captures each: the default (on the CPU, clock-timed measured runs and one operator run of
their own), every measured run traced (``operator_runs="all"``), and lite.
Plain and captured timings are interleaved so machine drift hits both; each ratio is shown as the
median over repeats with its range. Targets: (a) ≤ 1.05 on the pipeline, ≤ 1.12 on the decoder;
lite (a) ≤ 1.02; (c) ≤ 2 µs per event. Workloads: the two bundled examples, a tiny Hugging Face
Llama ``generate`` and a diffusers-style pipeline (a tiny ``UNet2DConditionModel`` in a denoising
loop, then ``vae.decode``), random weights, no download.

``--breakdown`` splits the same whole calls into their phases (`capture_phases.py`: instrumenting,
warm-ups, measured runs, the operator runs, the profiler's start and stop, reading its events, the
analysis, …), each phase's own ms and share of the whole call, medians over the repeats:

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/overhead.py --breakdown [--quick]

``--spans`` measures instead the cost of one instrumented module call (µs, profiler off and on):
200 do-nothing modules called in a loop, instrumented ÷ plain, interleaved, median of the repeats.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/overhead.py --examples [--repeats 5] [--warmup 3] [--runs 10]
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/overhead.py --spans
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # hf_models: tiny configs, no download
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks.zoo
sys.path.insert(0, str(Path(__file__).resolve().parent))  # capture_phases

import decoder_app
import hf_models
import pipeline_app
from capture_phases import OTHER, phase_split

import aitune
import aitune.torch as ait
from aitune.analysis.events import TraceEvents
from aitune.analysis.stamps import StampedSpan
from aitune.report import profile_from_events
from aitune.torch.performance import capture
from aitune.torch.performance import profile as profile_module
from aitune.torch.performance.capture import profiler_activities, trace_only_config, without_cycle_warning
from aitune.torch.performance.inputs import normalize_input
from aitune.torch.performance.instrument import Instrumented
from aitune.torch.performance.kineto import events_from_profiler
from aitune.torch.performance.regions import RegionTarget
from benchmarks.zoo import ddpm, gpt2_generate

SPAN_MODULES = 200


def wall_us(call: Callable[[], Any]) -> float:
    start = time.perf_counter_ns()
    call()
    return (time.perf_counter_ns() - start) / 1000


HF_NEW_TOKENS = 16
UNET_STEPS = 5


def spread(values: list[float]) -> str:
    """``median [min–max]`` of per-repeat figures: one noisy repeat on a shared machine shows as a range."""
    return f"{statistics.median(values):.3f} [{min(values):.2f}–{max(values):.2f}]"


def event_count(events: TraceEvents) -> int:
    """Events the capture read into the model: runs, regions, operators, launches, device work, annotations."""
    return sum(
        len(part)
        for part in (events.runs, events.regions, events.ops, events.launches, events.device, events.annotations)
    )


MODES = {
    "default": {},  # on the CPU: clock-timed measured runs, then DEFAULT_OPERATOR_RUNS operator runs
    "all": {"operator_runs": "all"},  # every measured run traced
    "lite": {"mode": "lite"},
}


def calls_made(doc: dict, runs: int) -> int:
    """Every workload call a capture made (see `aitune.torch.performance.capture.planned_calls`)."""
    warmups = doc.get("warmup", {}).get("performed", 0)  # runs set aside as still warming up among them
    set_aside = doc.get("warmup", {}).get("set_aside", 0)
    plain_baseline = doc.get("capture_overhead", {}).get("plain_samples", 0) if set_aside else 0
    operator_runs = doc.get("operator_runs")
    if doc["config"].get("operator_runs") == "all":
        return warmups + 2 + runs  # the memory run and the profiler's warmup
    return warmups + runs + plain_baseline + (len(operator_runs) if operator_runs else 1)


def measure(name: str, obj: Any, function: Callable[..., Any], input_data: Any, options: argparse.Namespace) -> dict:
    args, kwargs = normalize_input(input_data)

    def call() -> Any:
        with torch.no_grad():
            return function(*args, **kwargs)

    plain: list[float] = []
    captured: dict[str, list[float]] = {mode: [] for mode in MODES}
    run_ratios: dict[str, list[float]] = {mode: [] for mode in MODES}  # per repeat, ÷ the plain batch just before
    profiler_alone: list[float] = []  # torch.profiler around plain calls, no aitune: the floor of a traced run's (a)
    over_profiler: list[float] = []  # per repeat, the default capture's (a) ÷ the bare profiler's
    whole_ratios: dict[str, list[float]] = {mode: [] for mode in MODES}
    estimates: list[float] = []
    post_run: dict[str, list[float]] = {"default": [], "all": []}  # µs per event
    post_run_ms: dict[str, list[float]] = {"default": [], "all": []}
    events_read: dict[str, int] = {}
    post_run_parts: dict[str, list[tuple[float, float]]] = {"default": [], "all": []}
    ends_ns: list[int] = []
    read: list[int] = []
    read_ns: list[int] = []  # (c)'s parts: the read into the events model, then the analysis
    analysis_ns: list[int] = []

    def timed(*call_args: Any, **call_kwargs: Any) -> Any:
        result = function(*call_args, **call_kwargs)
        ends_ns.append(time.perf_counter_ns())
        return result

    def counted(*read_args: Any, **read_kwargs: Any) -> TraceEvents:
        start = time.perf_counter_ns()
        events = events_from_profiler(*read_args, **read_kwargs)
        read_ns.append(time.perf_counter_ns() - start)
        read.append(event_count(events))
        return events

    def analysed(events: TraceEvents) -> dict:
        start = time.perf_counter_ns()
        doc = profile_from_events(events)
        analysis_ns.append(time.perf_counter_ns() - start)
        return doc

    capture.events_from_profiler, profile_module.profile_from_events = counted, analysed
    for _ in range(options.repeats):
        batch = [wall_us(call) for _ in range(options.runs)]
        with torch.profiler.profile(activities=profiler_activities(), experimental_config=trace_only_config()):
            call()  # the profiler's first call allocates its buffers, as the capture's profiler warmup does
            profiled = [wall_us(call) for _ in range(options.runs)]
        profiler_alone.append(statistics.median(profiled) / statistics.median(batch))
        for mode, settings in MODES.items():
            batch = [wall_us(call) for _ in range(options.runs)]
            start = time.perf_counter_ns()
            prof = ait.profile(
                obj, input_data, timed, warmup_runs=options.warmup, measured_runs=options.runs, **settings
            )
            end = time.perf_counter_ns()
            performed = calls_made(prof.data, options.runs)
            runs = [run["timing"]["wall_time_us"] for run in prof.data["runs"]]
            plain += batch
            captured[mode] += runs
            run_ratios[mode].append(statistics.median(runs) / statistics.median(batch))
            if mode == "default":  # the same repeat's bare profiler: what aitune adds on top of it
                over_profiler.append(run_ratios[mode][-1] / profiler_alone[-1])
            whole_ratios[mode].append((end - start) / 1000 / (statistics.median(batch) * performed))
            if mode in post_run:
                post_run[mode].append((end - ends_ns[-1]) / 1000 / read[-1])
                post_run_ms[mode].append((end - ends_ns[-1]) / 1e6)
                events_read[mode] = read[-1]
                post_run_parts[mode].append((read_ns[-1] / 1000 / read[-1], analysis_ns[-1] / 1000 / read[-1]))
            if mode == "default" and "capture_overhead" in prof.data:
                estimates.append(prof.data["capture_overhead"]["ratio"])
    capture.events_from_profiler, profile_module.profile_from_events = events_from_profiler, profile_from_events
    row = {
        "example": name,
        "plain_ms": statistics.median(plain) / 1000,
        "profiler_alone": spread(profiler_alone),
        "default_over_profiler_alone": spread(over_profiler),
        "estimate": spread(estimates) if estimates else "–",
        "regions": len(prof.data["regions"]),
    }
    for mode in MODES:
        row[f"{mode}_captured_ms"] = statistics.median(captured[mode]) / 1000
        row[f"{mode}_run_ratio"] = spread(run_ratios[mode])
        row[f"{mode}_whole_ratio"] = spread(whole_ratios[mode])
    for mode, parts in post_run_parts.items():
        reads, analyses = zip(*parts, strict=True)
        row[f"{mode}_post_run"] = (
            f"{statistics.median(post_run_ms[mode]):.0f} ms, {statistics.median(post_run[mode]):.2f} "
            f"({statistics.median(reads):.2f} + {statistics.median(analyses):.2f}; {events_read[mode]:,} events)"
        )
    return row


WHOLE_CALL_WORKLOADS = {"DDPM-like (DDPMPipeline, 4 steps)": ddpm, "GPT-2-like generate (8 tokens)": gpt2_generate}
WHOLE_CALL_MODES = {"default": {}, "lite": {"mode": "lite"}}


Workload = Callable[[], tuple[Any, Any, Callable[..., Any]]]


def profiler_floor_us(call: Callable[[], Any]) -> float:
    """µs of one call inside a bare ``torch.profiler`` session that records what a default capture's operator run
    records (shapes and memory), from entering the session to torch having ended it: the least an operator run of
    its own can add to the whole call, before anything reads its events."""
    start = time.perf_counter_ns()
    with (
        without_cycle_warning(),
        torch.profiler.profile(
            activities=profiler_activities(),
            record_shapes=True,
            profile_memory=True,
            experimental_config=trace_only_config(),
        ),
    ):
        call()
    return (time.perf_counter_ns() - start) / 1000


def whole_call(name: str, build: Workload, options: argparse.Namespace) -> dict:
    """Per mode, per repeat: the whole ``profile()`` ÷ the sum of ``--runs`` plain calls just before it,
    and the capture's median measured run ÷ the plain batch's median; beside them, the profiler's floor:
    those plain calls and one bare profiler session (`profiler_floor_us`) ÷ the plain calls."""
    obj, input_data, function = build()

    def call() -> Any:
        with torch.no_grad():
            return function(input_data)

    for _ in range(3):  # the process's first calls (allocator, lazy imports) belong to neither side
        call()
    whole: dict[str, list[float]] = {mode: [] for mode in WHOLE_CALL_MODES}
    runs: dict[str, list[float]] = {mode: [] for mode in WHOLE_CALL_MODES}
    plain_ms: list[float] = []
    floor: list[float] = []
    for _ in range(options.repeats):
        batch = [wall_us(call) for _ in range(options.runs)]
        floor.append(1 + profiler_floor_us(call) / sum(batch))
        for mode, settings in WHOLE_CALL_MODES.items():
            batch = [wall_us(call) for _ in range(options.runs)]
            start = time.perf_counter_ns()
            with torch.no_grad():
                prof = ait.profile(
                    obj, input_data, function, warmup_runs=options.warmup, measured_runs=options.runs, **settings
                )
            whole[mode].append((time.perf_counter_ns() - start) / 1000 / sum(batch))
            measured = [run["timing"]["wall_time_us"] for run in prof.data["runs"]]
            runs[mode].append(statistics.median(measured) / statistics.median(batch))
            plain_ms.append(statistics.median(batch) / 1000)
    row = {"workload": name, "plain_ms": statistics.median(plain_ms), "floor": spread(floor)}
    for mode in WHOLE_CALL_MODES:
        row[f"{mode}_whole"], row[f"{mode}_run"] = spread(whole[mode]), spread(runs[mode])
    return row


def print_whole_calls(options: argparse.Namespace) -> None:
    print(
        f"repeats={options.repeats} warmup_runs={options.warmup} measured_runs={options.runs}; whole call ÷ "
        f"{options.runs} plain calls, run ratio = median measured run ÷ median plain call (median [range])\n"
    )
    header = ["workload", "plain call (ms)", "profiler's floor", "default: whole call", "default: run ratio"]
    print("| " + " | ".join([*header, "lite: whole call", "lite: run ratio"]) + " |")
    print("|---|---|---|---|---|---|---|")
    for name, module in WHOLE_CALL_WORKLOADS.items():
        row = whole_call(name, module.build, options)
        print(
            f"| {row['workload']} | {row['plain_ms']:.2f} | {row['floor']} | {row['default_whole']} | "
            f"{row['default_run']} | {row['lite_whole']} | {row['lite_run']} |"
        )


def breakdown(build: Workload, options: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    """Per mode, per repeat: each phase's own ms in one whole ``profile()`` call, beside the plain calls
    (``--runs`` of them, just before it) and the whole call itself."""
    obj, input_data, function = build()

    def call() -> Any:
        with torch.no_grad():
            return function(input_data)

    def captured(settings: dict[str, Any]) -> Any:
        with torch.no_grad():
            return ait.profile(
                obj, input_data, function, warmup_runs=options.warmup, measured_runs=options.runs, **settings
            )

    for settings in WHOLE_CALL_MODES.values():  # the process's first capture (profiler start-up, lazy imports)
        call()
        captured(settings)
    split: dict[str, dict[str, list[float]]] = {mode: defaultdict(list) for mode in WHOLE_CALL_MODES}
    for _ in range(options.repeats):
        for mode, settings in WHOLE_CALL_MODES.items():
            plain_ms = sum(wall_us(call) for _ in range(options.runs)) / 1000
            phases = phase_split(lambda settings=settings: captured(settings))
            split[mode][f"{options.runs} plain calls"].append(plain_ms)
            split[mode]["whole profile() call"].append(sum(phases.values()) * 1000)
            for phase, seconds in phases.items():
                split[mode][phase].append(seconds * 1000)
    return split


def print_breakdowns(options: argparse.Namespace) -> None:
    print(
        f"repeats={options.repeats} warmup_runs={options.warmup} measured_runs={options.runs}; each phase's own ms "
        "in one whole profile() call (median over repeats) and its share of the whole call\n"
    )
    for name, module in WHOLE_CALL_WORKLOADS.items():
        split = breakdown(module.build, options)
        print(f"{name}\n\n| phase | " + " | ".join(f"{mode}: ms | {mode}: share" for mode in split) + " |")
        print("|---|" + "---|---|" * len(split))
        phases = {phase: None for mode in split.values() for phase in mode if phase != OTHER}
        for phase in [*phases, OTHER]:
            cells = []
            for per_phase in split.values():
                whole = statistics.median(per_phase["whole profile() call"])
                values = per_phase.get(phase) or [0.0]
                cells.append(f"{statistics.median(values):.1f} | {statistics.median(values) / whole:.1%}")
            print(f"| {phase} | " + " | ".join(cells) + " |")
        print()


class _Nothing(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def span_costs(repeats: int, calls: int = 100) -> dict[str, list[float]]:
    """µs one instrumented call adds, per repeat: profiler spans (profiler off, on) and lite stamps."""
    modules = [_Nothing() for _ in range(SPAN_MODULES)]
    targets = [
        RegionTarget(f"untuned_module:m.{i}", "untuned_module", f"m.{i}", m, "_Nothing") for i, m in enumerate(modules)
    ]
    x = torch.zeros(1)

    def per_call_us() -> float:
        start = time.perf_counter_ns()
        for _ in range(calls):
            for module in modules:
                module(x)
        return (time.perf_counter_ns() - start) / 1000 / (calls * SPAN_MODULES)

    def instrumented(stamps: list[StampedSpan] | None = None) -> float:
        with Instrumented(targets, stamps):
            return per_call_us()

    costs: dict[str, list[float]] = {"span, profiler off": [], "span, profiler on": [], "lite stamp": []}
    for _ in range(repeats):
        costs["span, profiler off"].append(instrumented() - per_call_us())
        costs["lite stamp"].append(instrumented([]) - per_call_us())
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            costs["span, profiler on"].append(instrumented() - per_call_us())
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description="capture overhead as ratios")
    parser.add_argument("--repeats", type=int, default=None, help="7 for the whole call, 5 for --examples")
    parser.add_argument("--warmup", type=int, default=None, help="warmup_runs: 0 for the whole call, 3 for --examples")
    parser.add_argument("--runs", type=int, default=None, help="measured runs: 8 for the whole call, 10 for --examples")
    parser.add_argument("--quick", action="store_true", help="3 repeats: the whole call in under 2 minutes")
    parser.add_argument("--examples", action="store_true", help="(a)-(c) on the bundled examples and HF workloads")
    parser.add_argument("--spans", action="store_true", help="the cost of one instrumented module call")
    parser.add_argument("--breakdown", action="store_true", help="the whole call's phases, each one's ms and share")
    options = parser.parse_args()
    examples = options.examples or options.spans
    defaults = (5, 3, 10) if examples else (3 if options.quick else 7, 0, 8)
    for key, default in zip(("repeats", "warmup", "runs"), defaults, strict=True):
        if getattr(options, key) is None:
            setattr(options, key, default)
    torch.set_num_threads(1)
    print(f"load average {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} CPUs")
    print(
        f"aitune {aitune.__version__}, torch {torch.__version__}, Python {platform.python_version()}, "
        f"{platform.machine()}, {torch.get_num_threads()} torch threads"
    )
    if not examples:
        (print_breakdowns if options.breakdown else print_whole_calls)(options)
        print(f"load average {os.getloadavg()[0]:.2f} (1 min) at the end")
        return
    if options.spans:
        print(f"| what | µs per call, median | range ({options.repeats} repeats) |\n|---|---|---|")
        for what, costs in span_costs(options.repeats).items():
            print(f"| {what} | {statistics.median(costs):.2f} | {min(costs):.2f}–{max(costs):.2f} |")
        return

    cold_start = time.perf_counter()
    ait.profile(pipeline_app.pipe, pipeline_app.input_data, pipeline_app.infer, warmup_runs=0, measured_runs=1)
    cold_s = time.perf_counter() - cold_start  # the profiler's one-time start-up in a process

    rows = [
        measure("pipeline_app (infer)", pipeline_app.pipe, pipeline_app.infer, pipeline_app.input_data, options),
        measure("decoder_app (generate)", decoder_app.model, decoder_app.infer, decoder_app.input_data, options),
    ]
    llama, ids, _ = hf_models.llama_decoder()

    def generate(tokens: torch.Tensor) -> torch.Tensor:
        return llama.generate(tokens, max_new_tokens=HF_NEW_TOKENS, do_sample=False)

    rows.append(measure(f"HF Llama generate ({HF_NEW_TOKENS} tokens)", llama, generate, ids, options))
    unet_pipe = hf_models.DiffusionPipeline(steps=UNET_STEPS)
    embeddings = hf_models.diffusion_pipeline()[1]
    rows.append(measure(f"diffusers UNet pipeline ({UNET_STEPS} steps)", unet_pipe, unet_pipe, embeddings, options))
    print(
        f"repeats={options.repeats} warmup={options.warmup} runs={options.runs}; "
        f"first profile() in the process (profiler start-up included): {cold_s:.2f} s\n"
    )
    print(
        "| example | regions | plain run (ms) | (a) run ratio | (b) whole profile() | document's capture_overhead "
        "| (c) post-run: ms, µs/event (read + analysis) | all runs traced: (a) | (b) | (c) | torch.profiler alone "
        "| lite (a) | lite (b) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['example']} | {row['regions']} | {row['plain_ms']:.2f} | {row['default_run_ratio']} | "
            f"{row['default_whole_ratio']} | {row['estimate']} | {row['default_post_run']} | "
            f"{row['all_run_ratio']} | {row['all_whole_ratio']} | {row['all_post_run']} | {row['profiler_alone']} | "
            f"{row['lite_run_ratio']} | {row['lite_whole_ratio']} |"
        )
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) at the end")


if __name__ == "__main__":
    main()
