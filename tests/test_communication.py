"""Communication as its own time: collectives and point-to-point operations per region, run and residual.

The CPU cases read real gloo traces of 2 ranks recorded with plain torch.profiler
(`tests/data/gloo-2-ranks/make_traces.py`: committed ones, and one recorded afresh by the slow test);
the device cases are synthetic traces, since the CPU machine has no NCCL, and say so in their names.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import statistics
import subprocess
import sys

import pytest
from builders import MAIN, kernel, launch, op, region, run, span, trace
from cli_helpers import ROOT, run_cli

from aitune.analysis.collectives import dtype_bytes, is_communication, message_bytes
from aitune.cli.outputs import analyze_trace
from aitune.report import build_profile, read_trace, render_markdown, validate
from aitune.suggest import suggest

SAMPLES = ROOT / "tests" / "data" / "gloo-2-ranks"
SAMPLE_TRACES = sorted(SAMPLES.glob("rank*.trace.json.gz"))
FLOAT32_BYTES = 4


def _generator():
    spec = importlib.util.spec_from_file_location("make_traces", SAMPLES / "make_traces.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()
MESSAGE_BYTES = GEN.ELEMENTS * FLOAT32_BYTES


def _assert_counts_of_a_gloo_rank(doc):
    """What every run of a rank recorded by make_traces.py must show."""
    assert [region["id"] for region in doc["regions"]] == [GEN.REGION]  # gloo's own spans are not regions
    assert len(doc["runs"]) == GEN.RUNS
    for measured in doc["runs"]:
        (layer,) = measured["regions"]
        inside, outside = layer["communication"], measured["residual"]["communication"]
        total = measured["communication"]
        assert 0 < inside["cpu_time_us"] <= layer["cpu_time_us"]
        assert 0 < outside["cpu_time_us"] <= measured["residual"]["cpu_time_us"]
        assert inside["bytes"] == GEN.COLLECTIVES_IN_REGION * MESSAGE_BYTES
        assert outside["bytes"] == GEN.COLLECTIVES_OUTSIDE * MESSAGE_BYTES
        assert total["bytes"] == inside["bytes"] + outside["bytes"]
        assert total["cpu_time_us"] == pytest.approx(inside["cpu_time_us"] + outside["cpu_time_us"])
        cause = measured["residual"]["causes"]["communication"]
        assert cause["cpu_time_us"] == pytest.approx(outside["cpu_time_us"])
        assert sum(c["cpu_time_us"] for c in measured["residual"]["causes"].values()) == pytest.approx(
            measured["residual"]["cpu_time_us"]
        )
        assert layer["operators"]["categories"]["communication"] > 0  # the c10d calls made inside the region
    assert validate(doc) == []


@pytest.mark.slow
def test_two_real_gloo_ranks_show_communication_inside_the_region_and_in_the_residual(tmp_path):
    script = SAMPLES / "make_traces.py"  # its own process: torch.multiprocessing must import the ranks' function

    subprocess.run([sys.executable, str(script), str(tmp_path)], check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})

    for rank in range(GEN.WORLD_SIZE):
        _assert_counts_of_a_gloo_rank(analyze_trace(tmp_path / f"rank{rank}.trace.json.gz"))


@pytest.mark.parametrize("path", SAMPLE_TRACES, ids=lambda path: path.name)
def test_committed_gloo_traces_show_communication_per_region_and_residual(path):
    doc = analyze_trace(path)

    _assert_counts_of_a_gloo_rank(doc)


def test_a_gloo_transfer_on_the_worker_thread_counts_as_the_regions_time():
    events = read_trace(SAMPLE_TRACES[0])["traceEvents"]
    region_thread = next(event["tid"] for event in events if event["name"].startswith("aitune::region::"))
    worker_spans = [e for e in events if e["name"].startswith("gloo:") and e["tid"] != region_thread]
    caller_ops = [e for e in events if e["name"].startswith("c10d::")]

    doc = analyze_trace(SAMPLE_TRACES[0])

    assert worker_spans, "gloo moves the data of a collective on its own thread"
    caller_total = sum(event["dur"] for event in caller_ops)
    communication = sum(measured["communication"]["cpu_time_us"] for measured in doc["runs"])
    assert communication > caller_total  # the caller's c10d ops return before the transfer ends


def test_a_plain_torch_trace_with_profiler_steps_keeps_gloo_spans_out_of_its_regions():
    plain = copy.deepcopy(read_trace(SAMPLE_TRACES[1]))
    for event in plain["traceEvents"]:  # as a user writes it: ProfilerStep#N around a run, record_function("layer")
        if event.get("name", "").startswith("aitune::run::"):
            event["name"] = "ProfilerStep#" + event["name"].rsplit(":", 1)[1]
        elif event.get("name", "").startswith("aitune::region::"):
            event["name"] = "layer"

    doc = build_profile(plain)

    assert doc["profiler"]["trace_kind"] == "torch.profiler"
    assert [region["id"] for region in doc["regions"]] == ["untuned_module:layer"]
    assert all(measured["regions"][0]["communication"]["bytes"] > 0 for measured in doc["runs"])


def test_a_profile_without_communication_has_no_communication_keys():
    doc = analyze_trace(ROOT / "sample_traces" / "scenarios-batch.batch1.trace.json.gz")

    assert "communication" not in json.dumps(doc)
    assert "ommunication" not in render_markdown(doc)


def test_nested_and_overlapping_communication_spans_are_counted_once():
    worker = (1, 2)
    events = trace(
        run(0, 0, 100),
        region("untuned_module:layer", 0, 50),
        op("c10d::allreduce_", 10, 30),
        op("record_param_comms", 12, 28),
        span("gloo:all_reduce", 15, 40, thread=worker),  # the transfer, on gloo's thread
        op("c10d::allreduce_", 60, 70),
    )

    measured = build_profile(events)["runs"][0]

    assert measured["regions"][0]["communication"] == {"cpu_time_us": 30.0}
    assert measured["residual"]["communication"] == {"cpu_time_us": 10.0}
    assert measured["communication"] == {"cpu_time_us": 40.0}
    assert measured["residual"]["causes"]["communication"]["cpu_time_us"] == 10.0


def test_a_tree_node_counts_the_communication_of_its_children():
    events = trace(
        run(0, 0, 100),
        region("untuned_module:block", 0, 90),
        region("untuned_module:block.attn", 10, 40),
        op("c10d::allreduce_", 20, 30),
        op("c10d::broadcast_", 50, 55),
    )

    (block,) = build_profile(events)["runs"][0]["tree"]

    assert block["communication"] == {"cpu_time_us": 15.0}
    assert block["children"][0]["communication"] == {"cpu_time_us": 10.0}


def _synthetic_gpu_trace():
    """A run of 100 µs: a GEMM and an NCCL all-reduce launched in the region overlap for 20 µs; a broadcast after it."""
    param_comms = op("record_param_comms", 22, 26)
    param_comms["args"] = {"Collective name": "allreduce", "In msg nelems": 1024, "Out msg nelems": 1024,
                           "dtype": "Float", "Group size": 2}  # fmt: skip
    annotation = span("nccl:all_reduce", 22, 27)
    annotation["args"] = {"Input Dims": [[1024]], "Input type": ["float"]}  # the same operation: no bytes twice
    return trace(
        run(0, 0, 100),
        region("untuned_module:layer", 10, 90),
        launch(20, correlation=1),
        op("c10d::allreduce_", 21, 28),
        param_comms,
        annotation,
        launch(25, correlation=2),
        launch(95, correlation=3),
        kernel("ampere_sgemm_128x64_nn", 30, 30, correlation=1),
        kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 40, 40, correlation=2),
        kernel("ncclDevKernel_Broadcast_RING_LL", 96, 3, correlation=3),
    )


def test_synthetic_gpu_trace_nccl_kernels_are_device_communication_with_their_overlap_of_compute():
    doc = build_profile(_synthetic_gpu_trace())

    measured = doc["runs"][0]
    assert measured["regions"][0]["communication"] == {"cpu_time_us": 7.0, "device_time_us": 40.0, "bytes": 4096}
    assert measured["residual"]["communication"] == {"cpu_time_us": 0.0, "device_time_us": 3.0, "bytes": 0}
    assert measured["communication"] == {
        "cpu_time_us": 7.0,
        "device_time_us": 43.0,
        "bytes": 4096,
        "device_overlap_us": 20.0,  # the all-reduce ran beside the GEMM from 40 to 60 µs
        "device_overlap_fraction": pytest.approx(20.0 / 43.0),
    }
    assert validate(doc) == []


def test_synthetic_gpu_trace_markdown_shows_a_communication_section():
    markdown = render_markdown(build_profile(_synthetic_gpu_trace()))

    assert "## Communication" in markdown
    assert "untuned_module:layer" in markdown.split("## Communication")[1]


HOSTILE_ARGS = [
    {"In msg nelems": "1024", "Out msg nelems": "1024", "dtype": "Float"},
    {"In msg nelems": [1024], "dtype": ["Float"]},
    {"In msg nelems": True, "dtype": "Float"},
    {"In msg nelems": 2**80, "dtype": "Float"},
    {"In msg nelems": -4, "dtype": "Float"},
    {"In msg nelems": 1024, "dtype": {"name": "Float"}},
    {"In msg nelems": 1024.5, "dtype": "NoSuchType"},
]


@pytest.mark.parametrize("args", HOSTILE_ARGS, ids=lambda args: json.dumps(args)[:40])
def test_communication_args_of_the_wrong_type_give_no_bytes_and_no_error(args):
    param_comms = op("record_param_comms", 10, 20)
    param_comms["args"] = args

    measured = build_profile(trace(run(0, 0, 100), region("untuned_module:layer", 0, 50), param_comms))["runs"][0]

    assert measured["regions"][0]["communication"] == {"cpu_time_us": 10.0}


@pytest.mark.parametrize(
    "args",
    [
        {"Input Dims": "256", "Input type": "float"},
        {"Input Dims": [["256"]], "Input type": ["float"]},
        {"Input Dims": [[256, [1]]], "Input type": ["float"]},
        {"Input Dims": [[2**40, 2**40]], "Input type": ["float"]},
        {"Input Dims": [[256]], "Input type": [["float"]]},
        {"Input Dims": None, "Input type": None},
    ],
    ids=lambda args: json.dumps(args)[:40],
)
def test_backend_span_inputs_of_the_wrong_type_give_no_bytes(args):
    assert message_bytes("inputs", args) is None


def test_a_trace_with_hostile_communication_args_analyses_from_the_command_line(tmp_path):
    events = [run(0, 0, 100), region("untuned_module:layer", 0, 50)]
    for index, args in enumerate(HOSTILE_ARGS):
        param_comms = op("record_param_comms", 10 + index, 11 + index)
        param_comms["args"] = args
        events.append(param_comms)
    gloo = span("gloo:all_reduce", 30, 35, thread=(MAIN[0], 9))
    gloo["args"] = {"Input Dims": {"a": 1}, "Input type": "\x1b[2J"}
    path = tmp_path / "hostile-comm.trace.json"
    path.write_text(json.dumps(trace(*events, gloo)))

    result = run_cli("analyze", str(path), "--out", str(tmp_path / "out"), block_torch=True)

    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    doc = json.loads((tmp_path / "out" / "profile.json").read_text())
    assert doc["runs"][0]["regions"][0]["communication"] == {"cpu_time_us": 12.0}


def test_dtype_names_in_both_of_torchs_spellings_have_their_sizes():
    assert [dtype_bytes(name) for name in ("Float", "float", "BFloat16", "c10::BFloat16", "long int", "Half")] == [
        4,
        4,
        2,
        2,
        8,
        2,
    ]


def test_communication_names_are_recognised_by_their_prefixes():
    names = ["c10d::allreduce_", "c10d::recv_", "gloo:send", "record_param_comms", "ncclDevKernel_Broadcast_RING_LL"]

    assert all(is_communication(name) for name in names)
    assert not any(is_communication(name) for name in ("aten::add", "cudaLaunchKernel", "ProfilerStep#1"))


def test_suggest_names_the_residuals_communication_as_advice():
    doc = analyze_trace(SAMPLE_TRACES[0])

    advice = {line.code: line for line in suggest(doc).advice}

    outside = [measured["residual"]["communication"]["cpu_time_us"] for measured in doc["runs"]]
    assert advice["RESIDUAL_COMMUNICATION"].time_per_run_us == pytest.approx(statistics.median(outside))


def test_a_live_capture_under_gloo_and_its_saved_trace_agree_on_communication(tmp_path):
    torch = pytest.importorskip("torch")
    import torch.distributed as dist

    import aitune.torch as ait

    class Layer(torch.nn.Module):
        def forward(self, x):
            y = x * 2
            dist.all_reduce(y)
            return y

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = Layer()

        def forward(self, x):
            y = self.layer(x)
            dist.broadcast(y, src=0)  # outside every region: the residual's
            return y

    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        live = ait.profile(
            obj=Model(), input_data=torch.ones(64), warmup_runs=1, measured_runs=2, trace_file=tmp_path / "t.json.gz"
        ).data
    finally:
        dist.destroy_process_group()

    offline = analyze_trace(tmp_path / "t.json.gz")
    assert live["config"]["operator_runs"] == "all"  # in a process group, communication needs every run traced
    assert all(run["regions"][0]["communication"]["cpu_time_us"] > 0 for run in live["runs"])
    assert all(run["residual"]["communication"]["cpu_time_us"] > 0 for run in live["runs"])
    assert [run["communication"] for run in live["runs"]] == [run["communication"] for run in offline["runs"]]
    assert [run["residual"] for run in live["runs"]] == [run["residual"] for run in offline["runs"]]


def test_validate_names_a_run_whose_communication_does_not_add_up():
    doc = build_profile(_synthetic_gpu_trace())
    doc["runs"][0]["regions"][0]["communication"]["bytes"] += 1

    assert validate(doc) == ["runs[0].communication.bytes: regions plus residual is 4097.000, not 4096.000"]
