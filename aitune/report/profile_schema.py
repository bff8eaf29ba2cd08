"""``profile.schema.json``, the JSON Schema shipped for outside consumers, generated from the typed model.

`aitune.report.model` is the one definition; this file is derived from it by `msgspec.json.schema`,
with the header a standalone schema file carries (``$schema``, ``$id``, ``title``). aitune itself never
reads the file: it validates by decoding into the model. ``tests/test_profile_schema.py`` fails when the
shipped file and the model part; regenerate it with ``python -m aitune.report.profile_schema``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from aitune.report.model import Profile


@dataclass(frozen=True)
class ShippedSchema:
    """A document's JSON Schema file, shipped beside the code for outside consumers and generated from its model."""

    model: type[msgspec.Struct]
    file: Path
    title: str

    def schema(self) -> dict[str, Any]:
        """The JSON Schema (2020-12) of the model: its fields at the top, every other Struct under ``$defs``."""
        return standalone_schema(self.model, f"https://aitune.invalid/{self.file.name}", self.title)

    def text(self) -> str:
        """The schema as the shipped file holds it: indented, keys in the model's order, one final newline."""
        return json.dumps(self.schema(), indent=2, ensure_ascii=False) + "\n"

    def write(self) -> None:
        """Write the shipped file from the model."""
        self.file.write_text(self.text(), encoding="utf-8")
        print(f"wrote {self.file.name}")


SHIPPED = ShippedSchema(Profile, Path(__file__).with_name("profile.schema.json"), "aitune profile document")


def profile_schema() -> dict[str, Any]:
    """The profile's JSON Schema (`SHIPPED`)."""
    return SHIPPED.schema()


def standalone_schema(model: type[msgspec.Struct], schema_id: str, title: str) -> dict[str, Any]:
    """The JSON Schema (2020-12) of the document ``model``, as a file of its own: the header, ``model``'s
    fields at the top and every other Struct under ``$defs``."""
    _, components = msgspec.json.schema_components((model,))  # model's own entry is among them (the first is its $ref)
    definitions = _one_line_descriptions(components)
    root = definitions.pop(model.__name__)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": schema_id,
        **root,
        "title": title,
        "$defs": definitions,
    }


def _one_line_descriptions(node: Any) -> Any:
    """``node`` with each description (a Struct's docstring, wrapped in the source) on one line."""
    if isinstance(node, dict):
        return {
            key: " ".join(value.split()) if key == "description" else _one_line_descriptions(value)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_one_line_descriptions(item) for item in node]
    return node


if __name__ == "__main__":
    SHIPPED.write()
