"""``tuning.schema.json``, the JSON Schema of tuning.json shipped for outside consumers, generated from the typed
model.

`aitune.torch.tuning.report_model` is the one definition; this file is derived from it by `msgspec.json.schema`
(`aitune.report.profile_schema.ShippedSchema`, as the profile's and the plan's are). aitune itself never reads the
file. ``tests/test_report_models.py`` fails when the shipped file and the model part; regenerate it with
``python -m aitune.torch.tuning.report_schema``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aitune.report.profile_schema import ShippedSchema
from aitune.torch.tuning.report_model import TuningReport

SHIPPED = ShippedSchema(TuningReport, Path(__file__).with_name("tuning.schema.json"), "aitune tuning report")


def tuning_schema() -> dict[str, Any]:
    """The tuning report's JSON Schema (`SHIPPED`)."""
    return SHIPPED.schema()


if __name__ == "__main__":
    SHIPPED.write()
