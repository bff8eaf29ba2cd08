"""Reading a document's operator tables (``profiler.key_averages``), whichever tool wrote them.

aitune writes a list of rows per sort key; NVIDIA AITune writes an object per sort key with its rows
under ``events`` (beside ``sort_by`` and ``row_limit``). Documents are kept as their tool wrote them
(a bundle of AITune's file still loads in AITune's tooling), so every reader of operator rows — compare's
operator changes, the viewer's tables, the tables every report shows (`operator_tables`) — goes through
`operator_views`, which gives either shape's rows as `OperatorRow` records.
"""

from __future__ import annotations

from aitune.markers import MARKER_KEY_PREFIXES
from aitune.report.formatting import MISSING, ms
from aitune.report.model import AITuneOperatorTable, OperatorRow, ProfileLike, as_profile, given

CPU_VIEW = "cpu_time_total"
DEVICE_VIEW = "device_time_total"
AITUNE = "aitune"


def operator_views(doc: ProfileLike) -> dict[str, list[OperatorRow]]:
    """The operator rows by sort key (``cpu_time_total``, ``device_time_total``), in the order the document
    saved them.

    Rows that are run or region markers rather than operators (AITune's tables list ``ProfilerStep*``
    and its ``aitune.performance.*`` spans, since torch's key averages count annotations) are left
    out, so both tools' tables list the same kind of thing; the values of the other rows are untouched.
    """
    tables = given(as_profile(doc).profiler.key_averages, {})
    return {view: [row for row in _rows(table) if _is_operator(row.key)] for view, table in tables.items()}


def operator_rows(doc: ProfileLike, view: str = CPU_VIEW) -> list[OperatorRow]:
    """The rows of one sorted view (`operator_views`); the first view saved when ``view`` is absent."""
    views = operator_views(doc)
    return views.get(view) or next(iter(views.values()), [])


def written_by(doc: ProfileLike) -> str:
    """``"aitune"`` for this project's documents, ``"AITune <version>"`` for NVIDIA AITune's own.

    AITune's are recognised by their operator tables, an object per sort key (ours are lists).
    """
    record = as_profile(doc)
    if any(isinstance(view, AITuneOperatorTable) for view in given(record.profiler.key_averages, {}).values()):
        return f"AITune {record.aitune_version or '(unknown version)'}"
    return AITUNE


def _rows(table: list[OperatorRow] | AITuneOperatorTable) -> list[OperatorRow]:
    return table.events if isinstance(table, AITuneOperatorTable) else table


def _is_operator(key: str) -> bool:
    return not key.startswith(MARKER_KEY_PREFIXES)


OPERATOR_HEADER = (
    "Operator",
    "Device",
    "Count",
    "Self CPU (ms)",
    "CPU total (ms)",
    "Self device (ms)",
    "Device total (ms)",
)


def operator_tables(doc: ProfileLike) -> list[tuple[str, list[tuple[str, ...]]]]:
    """The top-operator tables every reader shows, as ``(title, rows)`` under `OPERATOR_HEADER`: by CPU
    total, then by device total, each only when the document holds rows for it (times in ms)."""
    views = operator_views(doc)
    tables = []
    for view, title in ((CPU_VIEW, "by CPU total"), (DEVICE_VIEW, "by device total")):
        rows = [_operator_cells(row) for row in views.get(view, [])]
        if rows:
            tables.append((title, rows))
    return tables


def _operator_cells(row: OperatorRow) -> tuple[str, ...]:
    times = (row.self_cpu_time_total_us, row.cpu_time_total_us, row.self_device_time_total_us, row.device_time_total_us)
    return (
        row.key,
        str(given(row.device_type, MISSING)),
        str(row.count),
        *(ms(given(time_us, None)) for time_us in times),
    )
