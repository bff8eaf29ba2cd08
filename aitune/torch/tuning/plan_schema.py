"""``plan.schema.json``, the JSON Schema of plan.json shipped for outside consumers, generated from the typed model.

`aitune.torch.tuning.plan_model` is the one definition; this file is derived from it by
`msgspec.json.schema` (`aitune.report.profile_schema.ShippedSchema`, as the profile's is). aitune
itself never reads the file: it checks a plan by converting it into the model.
``tests/tuning/test_plan_schema.py`` fails when the shipped file and the model part; regenerate it with
``python -m aitune.torch.tuning.plan_schema``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aitune.report.profile_schema import ShippedSchema
from aitune.torch.tuning.plan_model import Plan

SHIPPED = ShippedSchema(Plan, Path(__file__).with_name("plan.schema.json"), "aitune tuning plan")


def plan_schema() -> dict[str, Any]:
    """The plan's JSON Schema (`SHIPPED`)."""
    return SHIPPED.schema()


if __name__ == "__main__":
    SHIPPED.write()
