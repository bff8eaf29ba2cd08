"""Numbers under keys the model does not name: a valid document is refused for one that is no figure, with
its JSON path, however deep, and however the document was built (parsed, or in Python with NaN and tuples)."""

from __future__ import annotations

import orjson
import pytest

from aitune.report.model import MAX_FIGURE
from aitune.report.profile_schema import SHIPPED
from aitune.report.validate import validate

SAMPLE = SHIPPED.file.parents[2] / "sample_traces" / "scenarios-batch.profile.json"
TOO_LARGE = f"is larger than any figure a profile holds ({MAX_FIGURE:.2g})"


def sample():
    return orjson.loads(SAMPLE.read_bytes())


@pytest.mark.parametrize(
    ("number", "words"),
    [
        (float("nan"), "nan is not a finite number"),
        (float("-inf"), "-inf is not a finite number"),
        (1e300, f"1e+300 {TOO_LARGE}"),
        (MAX_FIGURE + 1, f"an integer of 63 bits {TOO_LARGE}"),
        (-(2**80), f"an integer of 81 bits {TOO_LARGE}"),
    ],
)
def test_a_number_no_figure_under_an_unknown_key_deep_in_the_tree_is_named_with_its_path(number, words):
    doc = sample()
    doc["scenarios"][1]["runs"][0]["tree"][1]["children"][2]["a_later_key"] = {"table": [1.5, ("x", number)]}

    assert validate(doc) == [f"scenarios[1].runs[0].tree[1].children[2].a_later_key.table[1][1]: {words}"]


def test_every_number_no_figure_under_unknown_keys_is_named_in_the_order_of_their_paths():
    doc = sample()
    doc["environment"]["a_later_key"] = float("inf")
    doc["runs"][0]["residual"]["note"] = [MAX_FIGURE, MAX_FIGURE * 2]
    doc["a_later_section"] = {"deep": [{"deeper": float("nan")}]}

    assert validate(doc) == [
        "a_later_section.deep[0].deeper: nan is not a finite number",
        "environment.a_later_key: inf is not a finite number",
        f"runs[0].residual.note[1]: an integer of 64 bits {TOO_LARGE}",
    ]


def test_ordinary_numbers_under_unknown_keys_are_valid():
    doc = sample()
    doc["runs"][0]["tree"][0]["children"][0]["a_later_key"] = [MAX_FIGURE, -MAX_FIGURE, 0.5, None, True, ()]
    doc["scenarios"][0]["a_later_key"] = {"count": 3}

    assert validate(doc) == []


def test_a_number_no_figure_in_a_field_the_model_names_is_refused_with_its_path():
    doc = sample()
    doc["scenarios"][0]["runs"][1]["tree"][1]["children"][0]["cpu_time_us"] = float("nan")

    assert validate(doc) == ["scenarios[0].runs[1].tree[1].children[0].cpu_time_us: nan is not a finite number"]
