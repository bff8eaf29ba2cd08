"""Reading a document's operator tables (``profiler.key_averages``), whichever tool wrote them.

aitune writes a list of rows per sort key; NVIDIA AITune writes an object per sort key with its rows
under ``events`` (beside ``sort_by`` and ``row_limit``). Documents are kept as their tool wrote them
(a bundle of AITune's file still loads in AITune's tooling), so every reader of operator rows — the
Markdown, compare's operator changes, the viewer's tables — goes through `operator_views`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aitune.markers import MARKER_KEY_PREFIXES
from aitune.report.formatting import MISSING, ms

CPU_VIEW = "cpu_time_total"
AITUNE = "aitune"


def operator_views(doc: Mapping[str, Any]) -> dict[str, list[Mapping[str, Any]]]:
    """The operator rows by sort key (``cpu_time_total``, ``device_time_total``), as the document saved them.

    Rows that are run or region markers rather than operators (AITune's tables list ``ProfilerStep*``
    and its ``aitune.performance.*`` spans, since torch's key averages count annotations) are left
    out, so both tools' tables list the same kind of thing; the values of the other rows are untouched.
    """
    views = doc.get("profiler", {}).get("key_averages", {})
    return {
        key: [row for row in _rows(view) if not str(row.get("key", "")).startswith(MARKER_KEY_PREFIXES)]
        for key, view in views.items()
    }


def operator_rows(doc: Mapping[str, Any], view: str = CPU_VIEW) -> list[Mapping[str, Any]]:
    """The rows of one sorted view (`operator_views`); the first view saved when ``view`` is absent."""
    views = operator_views(doc)
    return views.get(view) or next(iter(views.values()), [])


def written_by(doc: Mapping[str, Any]) -> str:
    """``"aitune"`` for this project's documents, ``"AITune <version>"`` for NVIDIA AITune's own.

    AITune's are recognised by their operator tables, an object per sort key (ours are lists).
    """
    views = doc.get("profiler", {}).get("key_averages", {})
    if any(isinstance(view, Mapping) for view in views.values()):
        return f"AITune {doc.get('aitune_version') or '(unknown version)'}"
    return AITUNE


def _rows(view: Any) -> list[Mapping[str, Any]]:
    return view.get("events", []) if isinstance(view, Mapping) else view


OPERATOR_HEADER = (
    "Operator",
    "Device",
    "Count",
    "Self CPU (ms)",
    "CPU total (ms)",
    "Self device (ms)",
    "Device total (ms)",
)
_TIME_KEYS = ("self_cpu_time_total_us", "cpu_time_total_us", "self_device_time_total_us", "device_time_total_us")


def operator_tables(doc: Mapping[str, Any]) -> list[tuple[str, list[tuple[str, ...]]]]:
    """The top-operator tables every reader shows, as ``(title, rows)`` under `OPERATOR_HEADER`: by CPU
    total, then by device total, each only when the document holds rows for it (times in ms)."""
    views = operator_views(doc)
    tables = []
    for view, title in (("cpu_time_total", "by CPU total"), ("device_time_total", "by device total")):
        rows = [
            (
                str(row["key"]),
                str(row.get("device_type", MISSING)),
                str(row["count"]),
                *(ms(row.get(key)) for key in _TIME_KEYS),
            )
            for row in views.get(view, [])
        ]
        if rows:
            tables.append((title, rows))
    return tables
