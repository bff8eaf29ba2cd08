"""``compare.schema.json``, the JSON Schema of a tune folder's compare report shipped for outside consumers,
generated from the typed model.

`aitune.compare.report_model` is the one definition; this file is derived from it by `msgspec.json.schema`
(`aitune.report.profile_schema.ShippedSchema`, as the profile's and the plan's are). aitune itself never
reads the file: it checks a compare report by converting it into the model. ``tests/test_compare_schema.py``
fails when the shipped file and the model part; regenerate it with ``python -m aitune.compare.report_schema``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aitune.compare.report_model import CompareReport
from aitune.report.profile_schema import ShippedSchema

SHIPPED = ShippedSchema(CompareReport, Path(__file__).with_name("compare.schema.json"), "aitune compare report")


def compare_schema() -> dict[str, Any]:
    """The compare report's JSON Schema (`SHIPPED`)."""
    return SHIPPED.schema()


if __name__ == "__main__":
    SHIPPED.write()
