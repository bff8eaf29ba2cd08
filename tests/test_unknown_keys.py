"""Keys the model does not name are no part of a profile: a document holding them is valid whatever they
hold, and what a reader gets from `load` leaves them out, so no reader ever sees an unchecked number."""

from __future__ import annotations

import orjson
import pytest

from aitune.report import load
from aitune.report.model import MAX_FIGURE, json_form
from aitune.report.problems import numbers
from aitune.report.profile_schema import SHIPPED
from aitune.report.validate import validate

SAMPLE = SHIPPED.file.parents[2] / "sample_traces" / "scenarios-batch.profile.json"
TOO_LARGE = f"is larger than any figure a profile holds ({MAX_FIGURE:.2g})"
HUGE = 1e300
"""A number no figure: JSON has no NaN, so a file carries its largest stand-in."""


def sample():
    return orjson.loads(SAMPLE.read_bytes())


def keys(value):
    """Every dictionary key anywhere in a JSON-like value."""
    if isinstance(value, dict):
        return set(value) | {key for item in value.values() for key in keys(item)}
    if isinstance(value, list):
        return {key for item in value for key in keys(item)}
    return set()


def test_a_document_with_unknown_keys_loads_without_them(tmp_path):
    doc = sample()
    doc["scenarios"][1]["runs"][0]["tree"][1]["children"][2]["a_later_key"] = {"table": [1.5, ["x", HUGE]]}
    doc["environment"]["a_later_key"] = -HUGE
    doc["a_later_section"] = {"deep": [{"deeper": HUGE}]}
    path = tmp_path / "later.profile.json"
    path.write_bytes(orjson.dumps(doc))

    loaded = load(path)

    read = json_form(loaded)
    assert "a_later_key" not in keys(read) and "a_later_section" not in read
    assert not list(numbers(read, lambda value: abs(value) > MAX_FIGURE))
    assert loaded.runs == load(SAMPLE).runs


@pytest.mark.parametrize("number", [float("nan"), float("-inf"), HUGE, MAX_FIGURE + 1, -(2**80)])
def test_a_number_under_an_unknown_key_leaves_a_built_document_valid(number):
    doc = sample()
    doc["scenarios"][1]["runs"][0]["tree"][1]["children"][2]["a_later_key"] = {"table": [1.5, ("x", number)]}

    assert validate(doc) == []


@pytest.mark.parametrize(
    ("number", "words"),
    [
        (float("nan"), "nan is not a finite number"),
        (float("-inf"), "-inf is not a finite number"),
        (HUGE, f"1e+300 {TOO_LARGE}"),
    ],
)
def test_a_number_no_figure_in_a_field_the_model_names_is_refused_with_its_path(number, words):
    doc = sample()
    doc["scenarios"][0]["runs"][1]["tree"][1]["children"][0]["cpu_time_us"] = number

    assert validate(doc) == [f"scenarios[0].runs[1].tree[1].children[0].cpu_time_us: {words}"]


def test_an_integer_field_past_any_figure_is_named_as_too_large_not_as_a_wrong_type():
    doc = sample()
    doc["runs"][0]["regions"][0]["calls"] = 2**70
    doc["runs"][1]["regions"][0]["calls"] = HUGE

    assert validate(doc) == [
        f"runs[0].regions[0].calls: an integer of 71 bits {TOO_LARGE}",
        f"runs[1].regions[0].calls: 1e+300 {TOO_LARGE}",
    ]


def test_a_refused_document_lists_the_problems_of_its_fields_only():
    doc = sample()
    doc["runs"][0]["a_later_key"] = float("nan")
    doc["runs"][0]["residual"]["cpu_time_fraction"] = -0.2

    assert validate(doc) == ["runs[0].residual.cpu_time_fraction: -0.2 is less than the minimum of 0"]
