"""A torch.profiler trace a user made themselves re-analyses offline: runs from its ProfilerStep#N spans,
regions from its record_function annotations and, recorded with_stack=True, from its module calls.

Every trace here is recorded by the test, with plain torch.profiler, on a small real model.
"""

import json
import subprocess
import sys

import pytest
import torch
from cli_helpers import ROOT, run_cli
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

import aitune.torch as ait
from aitune.markers import TRACE_KINDS
from aitune.report import build_profile, read_trace, validate
from aitune.report.profile_schema import profile_schema

MEASURED_STEPS = 3


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


class Annotated(nn.Module):
    """Marks its parts as a user would: ``encoder`` (with ``scale`` inside it) and ``head``."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = Encoder()
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with record_function("encoder"):
            hidden = self.encoder(x)
            with record_function("scale"):
                hidden = hidden * 2
        with record_function("head"):
            return self.head(hidden)


class Plain(Annotated):
    """The same model without annotations."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x) * 2)


def record(path, model: nn.Module, *, with_stack: bool = False, stepped: bool = True):
    """Profile a few calls the way torch's docs show: a schedule and prof.step() per iteration."""
    torch.manual_seed(0)
    x = torch.randn(4, 16)
    plan = schedule(wait=1, warmup=1, active=MEASURED_STEPS) if stepped else None
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], schedule=plan, with_stack=with_stack) as prof:
        for _ in range(2 + MEASURED_STEPS):
            model.eval()(x)
            if stepped:
                prof.step()
    prof.export_chrome_trace(str(path))
    return path


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    folder = tmp_path_factory.mktemp("torch-traces")
    return {
        "annotated": record(folder / "annotated.json", Annotated()),
        "with_stack": record(folder / "with_stack.json", Annotated(), with_stack=True),
        "plain": record(folder / "plain.json", Plain()),
        "unstepped": record(folder / "unstepped.json", Annotated(), stepped=False),
    }


def tree_shape(nodes):
    return [(node["region_id"], tree_shape(node["children"])) for node in nodes]


def step_durations(trace):
    return [event["dur"] for event in trace["traceEvents"] if event["name"].startswith("ProfilerStep#")]


def test_runs_are_the_profiler_steps(traces):
    trace = read_trace(traces["annotated"])

    doc = build_profile(trace)

    assert doc["profiler"]["trace_kind"] == "torch.profiler"
    assert [run["run_index"] for run in doc["runs"]] == list(range(MEASURED_STEPS))
    assert [run["timing"]["cpu_time_us"] for run in doc["runs"]] == step_durations(trace)


def test_annotations_are_regions_nested_as_they_ran_and_add_up(traces):
    doc = build_profile(read_trace(traces["annotated"]))

    assert validate(doc) == []
    for run in doc["runs"]:
        assert [region["region_id"] for region in run["regions"]] == ["untuned_module:encoder", "untuned_module:head"]
        assert tree_shape(run["tree"]) == [
            ("untuned_module:encoder", [("untuned_module:scale", [])]),
            ("untuned_module:head", []),
        ]
    assert {region["kind"] for region in doc["regions"]} == {"untuned_module"}


def test_with_stack_module_calls_become_regions_around_and_inside_the_annotations(traces):
    doc = build_profile(read_trace(traces["with_stack"]))

    assert validate(doc) == []
    for run in doc["runs"]:
        assert tree_shape(run["tree"]) == [
            (
                "untuned_module:Annotated_0",
                [
                    (
                        "untuned_module:encoder",
                        [
                            ("untuned_module:Encoder_0", [("untuned_module:Linear_0", [])]),
                            ("untuned_module:scale", []),
                        ],
                    ),
                    ("untuned_module:head", [("untuned_module:Linear_1", [])]),
                ],
            )
        ]


def test_a_trace_without_annotations_is_all_residual_and_says_how_to_add_regions(traces):
    doc = build_profile(read_trace(traces["plain"]))

    assert [run["residual"]["cpu_time_fraction"] for run in doc["runs"]] == [1.0] * MEASURED_STEPS
    assert [warning["code"] for warning in doc["warnings"] if warning["source"] == "analysis"] == [
        "NO_REGIONS_IN_TRACE"
    ]
    assert doc["runs"][0]["residual"]["causes"]["tensor_ops"]["cpu_time_us"] > 0


def test_the_operators_are_those_run_inside_the_steps(traces):
    doc = build_profile(read_trace(traces["annotated"]))

    counts = {row["key"]: row["count"] for row in doc["profiler"]["key_averages"]["cpu_time_total"]}

    assert counts["aten::linear"] == 2 * MEASURED_STEPS  # encoder's and head's, once a step


def test_analyze_writes_the_document_of_a_plain_trace(traces, tmp_path):
    result = run_cli("analyze", str(traces["annotated"]), "--json")

    assert result.returncode == 0, result.stderr
    expected = build_profile(read_trace(traces["annotated"]))
    assert json.loads(result.stdout) == {**expected, "trace_file": "annotated.json"}


def test_the_python_api_reads_a_plain_trace_too(traces):
    prof = ait.analyze_trace(traces["with_stack"])

    assert prof.data["profiler"]["trace_kind"] == "torch.profiler"
    assert len(prof.data["runs"]) == MEASURED_STEPS


def test_an_aitune_capture_is_read_as_ours_though_it_holds_profiler_steps(entry_capture):
    out, _ = entry_capture
    trace = read_trace(out / "trace.json.gz")

    doc = build_profile(trace)

    assert step_durations(trace)
    assert doc["profiler"]["trace_kind"] == "aitune"
    assert doc["runs"] == json.loads((out / "profile.json").read_text())["runs"]


def test_the_schema_admits_exactly_the_trace_kinds_analysis_writes():
    assert profile_schema()["$defs"]["Profiler"]["properties"]["trace_kind"]["enum"] == list(TRACE_KINDS)


def test_a_trace_without_run_markers_is_one_sentence_and_exit_2(traces):
    path = traces["unstepped"]

    result = run_cli("analyze", str(path))

    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"[error] {path}: no ProfilerStep#N or aitune run spans in this trace; record it with "
        "torch.profiler.profile(schedule=...) and call prof.step() after each iteration, "
        "or capture it with `aitune-profile capture`.\n"
    )


def test_the_example_script_writes_a_trace_that_analyze_reads(tmp_path):
    path = tmp_path / "plain_trace.json"
    script = ROOT / "examples" / "plain_torch_profiler.py"

    subprocess.run([sys.executable, str(script), "--out", str(path), "--steps", "2"], check=True, capture_output=True)

    doc = build_profile(read_trace(path))
    assert len(doc["runs"]) == 2
    assert [region["id"] for region in doc["regions"]] == ["untuned_module:encoder", "untuned_module:head"]
