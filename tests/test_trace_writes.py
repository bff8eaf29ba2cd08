"""Traces written in the background: complete once waited for, never half a file, errors told once."""

import gzip
import json
import threading

import pytest
import torch
from busy import TwoLevelModel

import aitune.torch as ait
from aitune.errors import OutputError
from aitune.report import read_trace_file_events
from aitune.report.io import write_atomic
from aitune.report.trace_writes import wait_for_traces, write_later


def test_waiting_returns_once_the_file_is_whole_and_the_name_never_shows_a_part(tmp_path):
    target = tmp_path / "trace.json"
    release = threading.Event()

    def write():
        release.wait(timeout=30)
        write_atomic(target, b'{"traceEvents": []}')

    write_later(target, write)
    seen_while_writing = target.exists()
    release.set()
    wait_for_traces(target)

    assert not seen_while_writing
    assert json.loads(target.read_bytes()) == {"traceEvents": []}


def test_a_failed_write_is_raised_to_the_first_waiter_only(tmp_path):
    target = tmp_path / "trace.json"

    def write():
        raise OutputError(f"cannot write {target}: the disk is full; free some space.")

    write_later(target, write)

    with pytest.raises(OutputError, match="the disk is full"):
        wait_for_traces(target)
    wait_for_traces(target)  # told once: a second wait has nothing left to say
    assert not target.exists()


def test_a_captures_trace_is_complete_after_the_wait_and_reanalyses_to_the_live_document(tmp_path):
    trace = tmp_path / "trace.json.gz"

    prof = ait.profile(TwoLevelModel(), torch.ones(1, 4), warmup_runs=1, measured_runs=3, trace_file=trace)
    written = prof.wait_for_trace()

    assert written == trace.resolve()
    assert "traceEvents" in json.loads(gzip.decompress(trace.read_bytes()))
    assert ait.analyze_trace(trace).data == prof.data
    assert [path.name for path in tmp_path.iterdir()] == ["trace.json.gz"]  # no temporary left beside it


def test_a_reader_of_the_trace_path_waits_for_the_write_by_itself(tmp_path):
    trace = tmp_path / "trace.json"

    prof = ait.profile(
        TwoLevelModel(), torch.ones(1, 4), warmup_runs=0, measured_runs=2, operator_runs=2, trace_file=trace
    )

    assert len(read_trace_file_events(trace).runs) == 2  # the operator runs: the file is read whole
    assert prof.trace_file == trace.resolve()
