"""The compare report's typed model: the shipped JSON Schema is generated from it and stays in step, every
committed tune folder's report converts into it, and a report wrong deep inside is refused naming the path."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import orjson
import pytest

from aitune.compare.loop_report import COMPARE_REPORT, read_compare_report
from aitune.compare.report_model import CompareReport
from aitune.compare.report_schema import SCHEMA_FILE, compare_schema, schema_text

SAMPLES = Path(__file__).parents[1] / "sample_traces"
COMMITTED = sorted(SAMPLES.rglob(COMPARE_REPORT))


def test_the_shipped_schema_is_the_one_the_model_generates():
    """Fails when a Struct changed and the file did not: run ``python -m aitune.compare.report_schema``."""
    assert SCHEMA_FILE.read_text(encoding="utf-8") == schema_text()


def test_the_schema_requires_what_a_reader_cannot_do_without_and_allows_unknown_keys():
    schema = compare_schema()

    assert schema["required"] == ["domain", "speedup", "tuned_regions"]
    assert "additionalProperties" not in json.dumps(schema["$defs"]["TunedRegion"])
    assert schema["$defs"]["EndToEnd"]["properties"]["source"]["enum"] == ["captures", "nothing tuned", "verified"]


def test_there_is_a_committed_tune_folder():
    assert COMMITTED, "no compare.json under sample_traces"


@pytest.mark.parametrize("path", COMMITTED, ids=lambda path: path.parent.name)
def test_every_committed_tune_folder_s_report_converts_and_reads(path):
    raw = orjson.loads(path.read_bytes())

    msgspec.convert(raw, CompareReport)
    assert read_compare_report(path, path.name).regions
