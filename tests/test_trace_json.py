"""The typed trace reader is a fast path, not a second meaning: it gives the events the general reader
gives, on traces written by aitune, NVIDIA AITune 0.6, a plain torch.profiler session and gloo ranks,
and hands every document its records cannot hold to the general reader."""

import gzip
import json
from pathlib import Path

import orjson
import pytest
from builders import kernel, launch, op, region, run, trace
from test_torch_traces import Annotated, record

from aitune.analysis import read_trace_events
from aitune.analysis.trace_json import trace_events_from_json
from aitune.errors import ProfileError
from aitune.report.io import parse_json, read_trace, read_trace_file_events, unpacked

ROOT = Path(__file__).resolve().parent.parent
COMMITTED_TRACES = sorted(
    str(path.relative_to(ROOT))
    for folder in ("sample_traces", "tests/data")
    for path in (ROOT / folder).rglob("*trace.json*")
)


def both_readers(data: bytes):
    """(general, typed) events of the JSON ``data``."""
    return read_trace_events(parse_json(data, "t.json")), trace_events_from_json(lambda: data, "t.json", _parse)


def _parse(data: bytes):
    return parse_json(data, "t.json")


@pytest.mark.parametrize("name", COMMITTED_TRACES)
def test_a_committed_trace_reads_the_same_through_both_readers(name):
    path = ROOT / name

    assert read_trace_file_events(path) == read_trace_events(read_trace(path))


def test_a_plain_torch_profiler_trace_reads_the_same_through_both_readers(tmp_path):
    path = record(tmp_path / "plain.json", Annotated(), with_stack=True)

    general, typed = both_readers(path.read_bytes())

    assert typed == general
    assert typed.runs and typed.module_calls and len(typed.ops) > 50


def test_launches_device_work_and_metadata_read_the_same_through_both_readers():
    document = trace(
        run(0, 0, 100),
        region("untuned_module:unet", 10, 60),
        op("aten::conv2d", 20, 50),
        launch(30, correlation=7),
        kernel("conv_kernel", 35, 4, correlation=7),
        warmup_wall_times_us=[120.0],
    )

    general, typed = both_readers(orjson.dumps(document))

    assert typed == general
    assert typed.device_of[7][0].name == "conv_kernel"
    assert typed.metadata["warmup_wall_times_us"] == [120.0]


@pytest.mark.parametrize(
    "odd",
    [
        {"ts": "25"},  # a number written as a string: float() reads it
        {"pid": 1.0},  # a float thread key
        {"args": {"correlation": "7"}, "cat": "kernel"},  # a correlation id written as a string
        {"args": [], "cat": "kernel"},  # args that are not an object but are empty
        {"ts": None, "ph": "i"},  # not a complete event: skipped whatever it holds
    ],
)
def test_a_document_the_typed_records_cannot_hold_reads_as_the_general_reader_reads_it(odd):
    document = trace(run(0, 0, 100), {**op("aten::add", 20, 30), **odd})

    general, typed = both_readers(orjson.dumps(document))

    assert typed == general


def test_a_malformed_event_is_the_general_readers_sentence_with_the_files_name():
    document = trace(run(0, 0, 100), {**op("aten::add", 20, 30), "ts": "soon"})

    with pytest.raises(ProfileError, match=r"^t\.json: traceEvents\[1\] is malformed \('ts' is str 'soon'\)"):
        trace_events_from_json(lambda: orjson.dumps(document), "t.json", _parse)


def test_deep_metadata_is_refused_by_the_callers_bounded_reader():
    data = json.dumps(trace(run(0, 0, 100), config={})).replace(
        '"aitune": {', '"aitune": {"deep": ' + "[" * 300 + "]" * 300 + ", "
    )

    with pytest.raises(ProfileError, match="nested deeper than"):
        trace_events_from_json(lambda: data.encode(), "t.json", _parse)


def test_an_operators_args_are_skipped_unread_however_deep():
    deep = trace(run(0, 0, 100), op("aten::add", 20, 30))
    data = orjson.dumps(deep).replace(b'"name":"aten::add"', b'"name":"aten::add","args":' + b"[" * 300 + b"]" * 300)

    assert trace_events_from_json(lambda: data, "t.json", _parse).ops.names == ("aten::add",)


def test_a_gzipped_trace_file_is_unpacked_before_it_is_read(tmp_path):
    path = ROOT / "tests/data/gloo-2-ranks/rank0.trace.json.gz"

    assert unpacked(path.read_bytes(), "rank0")[:1] == b"{"
    assert read_trace_file_events(path).runs


def test_a_gzip_of_several_members_unpacks_whole_and_a_cut_one_is_refused_in_one_sentence():
    first, second = b'{"traceEvents": [', b"]}"
    joined = gzip.compress(first) + gzip.compress(second)  # what `cat a.gz b.gz` makes; gzip reads it whole

    assert unpacked(joined, "joined") == first + second
    with pytest.raises(ProfileError, match=r"^cut: the gzip data is truncated or corrupt; copy the file again\.$"):
        unpacked(gzip.compress(first + second)[:-6], "cut")


def test_a_gzip_unpacking_past_the_limit_is_refused_without_unpacking_it_all():
    bomb = gzip.compress(b" " * 50_000_000)  # 50 MB of spaces in about 50 KB

    with pytest.raises(ProfileError, match="refused as a likely gzip bomb"):
        unpacked(bomb, "bomb")
