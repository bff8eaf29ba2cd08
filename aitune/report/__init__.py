"""Torch-free report: the profile document, its schema and validation, JSON I/O and Markdown.

The names below load their module on first use (PEP 562), so ``from aitune.report import load``
does not import the Markdown renderer nor the trace analysis a command never calls.
"""

from __future__ import annotations

from aitune.lazy_exports import lazy_exports

# Eager, and after its submodule's import: the package's ``validate`` is the function, not the module.
from aitune.report.invariants import check_adds_up as check_adds_up
from aitune.report.validate import validate as validate

_HOMES = {
    "builder": ("build_profile", "profile_from_events"),
    "document": (
        "LITE_LACKS",
        "ProfileDoc",
        "combine_scenarios",
        "is_lite",
        "scenario_names",
        "select_scenario",
    ),
    "headline": ("HeadlineRow", "headline_rows"),
    "io": ("dumps", "load", "read_json", "read_trace", "read_trace_file_events", "save"),
    "key_averages": ("operator_rows", "operator_views", "written_by"),
    "markdown": ("render_markdown",),
    "model": ("SCHEMA_VERSION", "json_form"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = sorted([*_HOME_OF, "check_adds_up", "validate"])

__getattr__, __dir__ = lazy_exports(__name__, _HOME_OF, globals())
