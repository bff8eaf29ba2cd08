"""Memory per region: what the allocator handed out, took back and held at its peak while each region ran,
from the profiler's memory events, recorded in runs that are not the measured runs' timing."""

from __future__ import annotations

import json

import pytest
import torch
from cli_helpers import terminal_text
from torch import nn

import aitune.torch
from aitune.analysis.events import read_trace_events
from aitune.analysis.memory import memory_section
from aitune.cli.render import diff_view, profile_view
from aitune.compare import compare_profiles
from aitune.report import build_profile, render_markdown, validate
from aitune.report.memory import memory_note, memory_rows
from aitune.viewer import tables

KNOWN = 4_000_000  # bytes of one float32 tensor of a million elements


class Keeps(nn.Module):
    """Allocates a tensor of known size and returns it: alive when the region exits."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ones(KNOWN // 4, dtype=torch.float32)


class Churns(nn.Module):
    """Allocates two tensors of known size one after the other, freeing the first before the second."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first = torch.ones(KNOWN // 4, dtype=torch.float32)
        total = first.sum()
        del first
        second = torch.ones(KNOWN // 4, dtype=torch.float32)
        return total + second.sum()


class Pipeline(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.keeps, self.churns = Keeps(), Churns()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.keeps(x), self.churns(x)


def cpu_stats(doc, path: str) -> dict:
    row = next(row for row in memory_rows(doc) if row.label == path and row.device == "cpu")
    return {"allocated": row.allocated_bytes, "freed": row.freed_bytes, "peak": row.peak_live_bytes}


@pytest.fixture(scope="module")
def captured() -> dict:
    return aitune.torch.profile(Pipeline(), torch.zeros(1), warmup_runs=1, measured_runs=2).data


def test_a_region_that_allocates_a_tensor_of_known_size_reports_it_within_one_percent(captured):
    keeps = cpu_stats(captured, "keeps")

    assert keeps["allocated"] == pytest.approx(KNOWN, rel=0.01)
    assert keeps["peak"] == pytest.approx(KNOWN, rel=0.01)
    assert keeps["freed"] == 0


def test_peak_live_bytes_of_a_region_that_allocates_then_frees_is_one_tensor_not_two(captured):
    churns = cpu_stats(captured, "churns")

    assert churns["allocated"] == pytest.approx(2 * KNOWN, rel=0.01)
    assert churns["freed"] == pytest.approx(2 * KNOWN, rel=0.01)
    assert churns["peak"] == pytest.approx(KNOWN, rel=0.01)


def test_memory_comes_from_the_operator_runs_and_the_document_says_so(captured):
    memory = captured["memory"]

    assert memory["runs_from"] == "operator_runs"
    assert [run["run_index"] for run in memory["runs"]] == [run["run_index"] for run in captured["operator_runs"]]
    assert "operator run(s) of their own" in render_markdown(captured)
    assert validate(captured) == []


def test_the_measured_runs_never_record_memory(tmp_path):
    trace = tmp_path / "trace.json"

    doc = aitune.torch.profile(
        Pipeline(), torch.zeros(1), warmup_runs=1, measured_runs=2, operator_runs="all", trace_file=trace
    ).data
    aitune.torch.wait_for_traces()  # the trace is written in the background

    # Every measured run was under the profiler, and its session recorded no memory event: the memory
    # comes from a session of its own, before them.
    assert not read_trace_events(json.loads(trace.read_text())).memory
    assert doc["memory"]["runs_from"] == "memory_run" and doc["memory"]["event_count"] > 0


def test_a_capture_traced_in_every_run_takes_memory_from_one_run_of_its_own():
    doc = aitune.torch.profile(Pipeline(), torch.zeros(1), warmup_runs=1, measured_runs=2, operator_runs="all").data

    assert doc["memory"]["runs_from"] == "memory_run"
    assert len(doc["memory"]["runs"]) == 1
    assert cpu_stats(doc, "keeps")["allocated"] == pytest.approx(KNOWN, rel=0.01)
    assert validate(doc) == []


def test_the_saved_trace_reanalysed_gives_the_same_memory(tmp_path, captured):
    trace = tmp_path / "trace.json"
    live = aitune.torch.profile(Pipeline(), torch.zeros(1), warmup_runs=1, measured_runs=2, trace_file=trace).data
    aitune.torch.wait_for_traces()  # the trace is written in the background

    offline = build_profile(json.loads(trace.read_text()))

    assert offline["memory"] == live["memory"]


def test_a_lite_capture_says_it_lacks_memory_in_every_reader(captured):
    lite = aitune.torch.profile(Pipeline(), torch.zeros(1), warmup_runs=1, measured_runs=2, mode="lite").data
    shown = terminal_text(profile_view(lite), diff_view(compare_profiles(captured, lite)))

    assert "memory" not in lite and validate(lite) == []
    assert "or memory" in memory_note(lite)
    assert "or memory" in render_markdown(lite)
    assert "memory after: lite capture" in shown
    assert tables.memory_table(lite).empty


def test_a_foreign_trace_without_memory_events_says_so_rather_than_zero():
    trace = {
        "traceEvents": [
            {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 100, "pid": 1, "tid": 1},
            {"ph": "X", "cat": "user_annotation", "name": "encoder", "ts": 10, "dur": 50, "pid": 1, "tid": 1},
        ]
    }

    doc = build_profile(trace)

    assert doc["memory"] == {"runs_from": "runs", "event_count": 0}
    assert memory_rows(doc) == []
    assert "no memory events" in memory_note(doc)
    assert "no memory events" in render_markdown(doc)


def synthetic_cuda_trace() -> dict:
    """A synthetic trace (written here, no GPU was used) shaped as torch's profiler writes the CUDA caching
    allocator's memory events: ``Device Type`` 1, ``Device Id`` 0, ``Total Allocated`` the device's live bytes."""

    def memory(ts: float, size: int, total: int, device_type: int = 1, device_id: int = 0) -> dict:
        args = {"Total Reserved": 2**26, "Total Allocated": total, "Bytes": size, "Addr": 1000 + ts}
        args |= {"Device Type": device_type, "Device Id": device_id}
        return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
                "args": args}  # fmt: skip

    weights = 50_000_000  # live on the device before the run: counted by the allocator, not by the region
    return {
        "traceEvents": [
            {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 100, "pid": 1, "tid": 1},
            {"ph": "X", "cat": "user_annotation", "name": "unet", "ts": 10, "dur": 50, "pid": 1, "tid": 1},
            memory(12, 8_000_000, weights + 8_000_000),
            memory(20, 2_000_000, weights + 10_000_000),
            memory(30, -8_000_000, weights + 2_000_000),
            memory(40, 1024, 1024, device_type=0, device_id=-1),  # a host allocation beside them
            memory(70, -2_000_000, weights),  # after the region: the run's, not the region's
        ]
    }


def test_a_synthetic_cuda_memory_trace_reports_the_caching_allocator_per_device():
    doc = build_profile(synthetic_cuda_trace())

    unet = {row.device: row for row in memory_rows(doc) if row.label == "unet"}
    assert doc["memory"]["devices"] == ["cpu", "cuda:0"]
    assert (unet["cuda:0"].allocated_bytes, unet["cuda:0"].freed_bytes) == (10_000_000, 8_000_000)
    assert unet["cuda:0"].peak_live_bytes == 10_000_000
    assert unet["cuda:0"].allocator_peak_bytes == 60_000_000
    assert unet["cpu"].allocated_bytes == 1024
    assert validate(doc) == []


def test_malformed_memory_events_are_skipped_never_read_as_zero_bytes():
    trace = synthetic_cuda_trace()
    trace["traceEvents"][2]["args"]["Bytes"] = "8000000"  # a string: not an allocation this reader trusts
    trace["traceEvents"][3]["args"]["Device Type"] = [1]

    events = read_trace_events(trace)

    assert [event.bytes for event in events.memory] == [-8_000_000, 1024, -2_000_000]
    assert memory_section(events, "runs")["event_count"] == 3


def test_compare_shows_memory_before_and_after_per_region(captured):
    smaller = json.loads(json.dumps(captured))
    for run in smaller["memory"]["runs"]:
        for region in run["regions"]:
            if region["region_id"].endswith("keeps"):
                region["devices"]["cpu"]["peak_live_bytes"] //= 2

    diff = compare_profiles(captured, smaller)

    keeps = next(row for row in diff.memory if row.path == "keeps")
    assert keeps.after_peak_bytes * 2 == keeps.before_peak_bytes
    assert diff.to_dict()["memory"][0]["path"] == "(whole run)"


def test_the_viewer_and_the_terminal_show_memory(captured):
    shown = terminal_text(profile_view(captured))

    frame = tables.memory_table(captured)

    assert {"keeps", "churns", "(whole run)"} <= set(frame["path"])
    assert "Memory" in shown
