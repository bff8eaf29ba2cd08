"""Torch-free report: the profile document, its schema and validation, JSON I/O and Markdown.

The names below load their module on first use (PEP 562), so ``from aitune.report import load``
does not import the Markdown renderer nor the trace analysis a command never calls.
"""

from __future__ import annotations

import importlib
from typing import Any

# Eager, and after its submodule's import: the package's ``validate`` is the function, not the module.
from aitune.report.validate import check_adds_up as check_adds_up
from aitune.report.validate import validate as validate

_HOMES = {
    "document": (
        "LITE_LACKS",
        "SCHEMA_VERSION",
        "ProfileDoc",
        "build_profile",
        "combine_scenarios",
        "is_lite",
        "profile_from_events",
        "scenario_names",
        "select_scenario",
    ),
    "headline": ("HeadlineRow", "headline_rows"),
    "io": ("dumps", "load", "read_json", "read_trace", "read_trace_file_events", "save"),
    "key_averages": ("operator_rows", "operator_views", "written_by"),
    "markdown": ("render_markdown",),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = sorted([*_HOME_OF, "check_adds_up", "validate"])


def __getattr__(name: str) -> Any:
    if name not in _HOME_OF:
        raise AttributeError(f"module 'aitune.report' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"aitune.report.{_HOME_OF[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
