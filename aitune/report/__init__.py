"""Torch-free report: the profile document, its schema and validation, JSON I/O and Markdown."""

from aitune.report.document import (
    LITE_LACKS,
    SCHEMA_VERSION,
    ProfileDoc,
    build_profile,
    combine_scenarios,
    is_lite,
    profile_from_events,
    scenario_names,
    select_scenario,
)
from aitune.report.headline import HeadlineRow, headline_rows
from aitune.report.io import dumps, load, read_json, read_trace, read_trace_file_events, save
from aitune.report.key_averages import operator_rows, operator_views, written_by
from aitune.report.markdown import render_markdown
from aitune.report.validate import check_adds_up, validate

__all__ = [
    "LITE_LACKS",
    "SCHEMA_VERSION",
    "HeadlineRow",
    "ProfileDoc",
    "build_profile",
    "check_adds_up",
    "combine_scenarios",
    "dumps",
    "headline_rows",
    "is_lite",
    "load",
    "operator_rows",
    "operator_views",
    "profile_from_events",
    "read_json",
    "read_trace",
    "read_trace_file_events",
    "render_markdown",
    "save",
    "scenario_names",
    "select_scenario",
    "validate",
    "written_by",
]
