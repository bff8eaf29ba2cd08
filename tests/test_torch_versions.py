"""What differs between torch 2.13 and 2.11 (the lent GPU image's): reading a finished profiler session
(kineto's activities where torch has the fast path, the exported Chrome trace where it does not, with the
same events either way), and the profiler's start-up warning."""

from __future__ import annotations

import tempfile
import warnings

import pytest
import torch
import torch.profiler.profiler as torch_profiler
from busy import BusyPipeline
from torch._C._autograd import _ProfilerResult
from torch.autograd.profiler import record_function
from torch.profiler import ProfilerActivity, profile

import aitune.torch as ait
from aitune.markers import region_span_name, run_span_name
from aitune.torch.performance import kineto
from aitune.torch.performance.capture import export_trace
from aitune.torch.performance.kineto import events_from_exported_trace, events_from_profiler

HAS_FAST_PATH = hasattr(_ProfilerResult, "trace_activities")


def finished_session(**options: bool) -> profile:
    """A finished CPU session over one run holding one region; ``options`` go to the profiler."""
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    with (
        profile(activities=[ProfilerActivity.CPU], **options) as session,
        record_function(run_span_name(0)),
        record_function(region_span_name("untuned_module:0")),
    ):
        model(torch.randn(2, 8))
    return session


@pytest.mark.skipif(not HAS_FAST_PATH, reason=f"torch {torch.__version__} has no kineto_results.trace_activities()")
def test_the_exported_trace_gives_the_same_events_as_kineto_s_activities():
    session = finished_session()

    fast = events_from_profiler(session, {"source": "live"})
    exported = events_from_exported_trace(session, {"source": "live"})

    assert exported == fast
    assert [span.name for span in exported.runs] == [run_span_name(0)]
    assert [span.name for span in exported.regions] == [region_span_name("untuned_module:0")]
    assert "aten::linear" in exported.ops.names


@pytest.mark.skipif(not HAS_FAST_PATH, reason=f"torch {torch.__version__} has no kineto_results.trace_activities()")
def test_memory_events_and_operator_shapes_read_from_the_session_match_the_exported_trace():
    session = finished_session(record_shapes=True, profile_memory=True)

    fast = events_from_profiler(session, {"source": "live"})
    exported = events_from_exported_trace(session, {"source": "live"})

    assert exported == fast
    assert fast.memory and any(event.bytes > 0 for event in fast.memory)
    assert any(inputs.dims and inputs.dims[0] == (2, 8) for inputs in fast.op_inputs.values())


@pytest.mark.skipif(not HAS_FAST_PATH, reason=f"torch {torch.__version__} has no kineto_results.trace_activities()")
def test_an_activity_whose_args_do_not_parse_leaves_the_others_args_read(monkeypatch):
    session = finished_session(record_shapes=True, profile_memory=True)
    exported = events_from_exported_trace(session, {"source": "live"})
    calls = []

    def one_garbled(activity):  # the joined parse fails; each activity's own text is then read alone
        calls.append(activity)
        return "not json" if len(calls) == 1 else activity.metadata_json()

    monkeypatch.setattr(kineto, "_METADATA_JSON", one_garbled)
    fast = events_from_profiler(session, {"source": "live"})

    assert calls
    assert fast == exported


@pytest.mark.skipif(not HAS_FAST_PATH, reason=f"torch {torch.__version__} has no kineto_results.trace_activities()")
def test_communication_operators_keep_their_trace_order_among_the_operators_either_way():
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        model = torch.nn.Linear(8, 8)
        with profile(activities=[ProfilerActivity.CPU]) as session, record_function(run_span_name(0)):
            for _ in range(2):
                y = model(torch.randn(2, 8))
                dist.all_reduce(y)
    finally:
        dist.destroy_process_group()

    fast = events_from_profiler(session, {"source": "live"})
    exported = events_from_exported_trace(session, {"source": "live"})

    assert exported == fast
    names = list(fast.ops.names)
    first_reduce = next(index for index, name in enumerate(names) if name.startswith("c10d::"))
    assert "aten::linear" in names[first_reduce:]  # the second call's operators come after the first reduce
    assert [span.name for span in fast.communication if span.name.startswith("c10d::")] == [
        name for name in names if name.startswith("c10d::")
    ]


@pytest.mark.skipif(not HAS_FAST_PATH, reason=f"torch {torch.__version__} has no kineto_results.trace_activities()")
def test_the_trace_written_gives_the_same_events_as_kineto_s_activities(tmp_path):
    session = finished_session()

    fast = events_from_profiler(session, {"source": "live"})
    written = events_from_profiler(session, {"source": "live"}, export_trace(session, tmp_path / "trace.json.gz"))

    assert written == fast


def test_without_kineto_s_activities_a_capture_reads_its_exported_trace(monkeypatch, tmp_path):
    monkeypatch.delattr(_ProfilerResult, "trace_activities", raising=False)  # as on torch 2.11
    trace = tmp_path / "trace.json.gz"

    prof = ait.profile(BusyPipeline(), torch.ones(1, 4), warmup_runs=0, measured_runs=2, trace_file=trace)

    assert len(prof.data["runs"]) == 2
    assert [region["region_id"] for region in prof.data["runs"][0]["regions"]] == [
        "untuned_module:encoder",
        "untuned_module:denoiser",
    ]
    assert ait.analyze_trace(trace).data == prof.data


def test_without_kineto_s_activities_a_capture_without_a_trace_file_leaves_no_file_behind(monkeypatch, tmp_path):
    monkeypatch.delattr(_ProfilerResult, "trace_activities", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # where the fallback's export goes

    prof = ait.profile(BusyPipeline(), torch.ones(1, 4), warmup_runs=0, measured_runs=1)

    assert [region["region_id"] for region in prof.data["runs"][0]["regions"]] == [
        "untuned_module:encoder",
        "untuned_module:denoiser",
    ]
    assert prof.trace_file is None
    assert sorted(path.name for path in tmp_path.rglob("*")) == ["tmp"]


def test_a_capture_passes_on_no_profiler_cycle_warning(monkeypatch):
    monkeypatch.setattr(torch_profiler, "_WARNINGS_SHOWN", set())  # torch warns once a process

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ait.profile(BusyPipeline(), torch.ones(1, 4), warmup_runs=0, measured_runs=1)

    assert not [str(w.message) for w in caught if "Profiler clears events" in str(w.message)]
