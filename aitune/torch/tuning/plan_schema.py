"""``plan.schema.json``, the JSON Schema of plan.json shipped for outside consumers, generated from the typed model.

`aitune.torch.tuning.plan_model` is the one definition; this file is derived from it by
`msgspec.json.schema` (`aitune.report.profile_schema.standalone_schema`, as the profile's is). aitune
itself never reads the file: it checks a plan by converting it into the model.
``tests/tuning/test_plan_schema.py`` fails when the shipped file and the model part; regenerate it with
``python -m aitune.torch.tuning.plan_schema``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aitune.report.profile_schema import file_text, standalone_schema
from aitune.torch.tuning.plan_model import Plan

SCHEMA_FILE = Path(__file__).with_name("plan.schema.json")
SCHEMA_ID = "https://aitune.invalid/plan.schema.json"


def plan_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of `Plan`: its fields at the top, every other Struct under ``$defs``."""
    return standalone_schema(Plan, SCHEMA_ID, "aitune tuning plan")


def schema_text() -> str:
    """`plan_schema` as the shipped file holds it."""
    return file_text(plan_schema())


def main() -> None:
    """Write `SCHEMA_FILE` from the model."""
    SCHEMA_FILE.write_text(schema_text(), encoding="utf-8")
    print(f"wrote {SCHEMA_FILE.name}")


if __name__ == "__main__":
    main()
