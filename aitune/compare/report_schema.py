"""``compare.schema.json``, the JSON Schema of a tune folder's compare report shipped for outside consumers,
generated from the typed model.

`aitune.compare.report_model` is the one definition; this file is derived from it by `msgspec.json.schema`
(`aitune.report.profile_schema.standalone_schema`, as the profile's and the plan's are). aitune itself never
reads the file: it checks a compare report by converting it into the model. ``tests/test_compare_schema.py``
fails when the shipped file and the model part; regenerate it with ``python -m aitune.compare.report_schema``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aitune.compare.report_model import CompareReport
from aitune.report.profile_schema import file_text, standalone_schema

SCHEMA_FILE = Path(__file__).with_name("compare.schema.json")
SCHEMA_ID = "https://aitune.invalid/compare.schema.json"


def compare_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of `CompareReport`: its fields at the top, every other Struct under ``$defs``."""
    return standalone_schema(CompareReport, SCHEMA_ID, "aitune compare report")


def schema_text() -> str:
    """`compare_schema` as the shipped file holds it."""
    return file_text(compare_schema())


def main() -> None:
    """Write `SCHEMA_FILE` from the model."""
    SCHEMA_FILE.write_text(schema_text(), encoding="utf-8")
    print(f"wrote {SCHEMA_FILE.name}")


if __name__ == "__main__":
    main()
