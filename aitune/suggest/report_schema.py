"""``suggestions.schema.json``, the JSON Schema of suggestions.json shipped for outside consumers, generated from
the typed model.

`aitune.suggest.report_model` is the one definition; this file is derived from it by `msgspec.json.schema`
(`aitune.report.profile_schema.ShippedSchema`, as the profile's, the plan's and the compare report's are). aitune
itself never reads the file: it checks suggestions by converting them into the model.
``tests/test_report_models.py`` fails when the shipped file and the model part; regenerate it with
``python -m aitune.suggest.report_schema``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aitune.report.profile_schema import ShippedSchema
from aitune.suggest.report_model import SuggestionsReport

SHIPPED = ShippedSchema(SuggestionsReport, Path(__file__).with_name("suggestions.schema.json"), "aitune suggestions")


def suggestions_schema() -> dict[str, Any]:
    """The suggestions' JSON Schema (`SHIPPED`)."""
    return SHIPPED.schema()


if __name__ == "__main__":
    SHIPPED.write()
