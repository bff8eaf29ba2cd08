"""The shipped JSON Schema is generated from the typed model, and stays in step with it."""

from __future__ import annotations

import json

import msgspec
import orjson

from aitune.report.model import Profile
from aitune.report.profile_schema import SHIPPED, profile_schema
from aitune.report.validate import validate


def test_the_shipped_schema_is_the_one_the_model_generates():
    """Fails when a Struct changed and the file did not: run ``python -m aitune.report.profile_schema``."""
    assert SHIPPED.file.read_text(encoding="utf-8") == SHIPPED.text()


def test_the_schema_requires_what_the_model_requires_and_keeps_unknown_keys_allowed():
    schema = profile_schema()

    required = {field.encode_name for field in msgspec.structs.fields(Profile) if field.required}
    assert set(schema["required"]) == required >= {"schema_version", "runs", "regions", "warnings"}
    assert "additionalProperties" not in json.dumps(schema["$defs"]["Run"])
    assert schema["$defs"]["Phase"]["properties"]["name"]["enum"] == sorted(["encoder", "prefill", "decode"])


def test_a_document_with_unknown_keys_and_a_sample_profile_decode(tmp_path):
    doc = orjson.loads((SHIPPED.file.parents[2] / "sample_traces" / "scenarios-batch.profile.json").read_bytes())
    doc["a_key_of_a_later_aitune"] = {"anything": [1, "two"]}
    doc["runs"][0]["another"] = True

    assert validate(doc) == []


def test_a_refused_document_lists_every_problem_with_its_key_named():
    doc = orjson.loads((SHIPPED.file.parents[2] / "sample_traces" / "scenarios-batch.profile.json").read_bytes())
    doc["runs"][0]["timing"]["cpu_time_us"] = -1.0
    first_table = next(iter(doc["profiler"]["key_averages"]))
    doc["profiler"]["key_averages"][first_table][0]["count"] = "3"
    doc["regions"][0]["kind"] = "module"

    problems = validate(doc)

    assert problems == [
        f"profiler.key_averages.{first_table}[0].count: '3' is not of type 'integer'",
        "regions[0].kind: 'module' is not one of 'aot_managed_module', 'jit_managed_module', 'untuned_module', "
        "'compiled_module', 'aot_module', 'jit_module'",
        "runs[0].timing.cpu_time_us: -1.0 is less than the minimum of 0",
    ]
