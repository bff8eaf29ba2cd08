"""The operator table ("key averages"): per operator name, counts and self/total times over the measured runs.

Built from the trace's CPU operator spans and the device work they launched, like torch's
``key_averages()`` but without building torch's event objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aitune.analysis.events import ThreadView, TraceEvents

ROW_LIMIT = 20
"""Rows kept per sorted view; the full event stream lives in the Chrome trace."""


@dataclass
class OperatorRow:
    key: str
    device_type: str
    count: int = 0
    self_cpu_time_total_us: float = 0.0
    cpu_time_total_us: float = 0.0
    self_device_time_total_us: float = 0.0
    device_time_total_us: float = 0.0

    def to_dict(self, with_device: bool) -> dict[str, Any]:
        row: dict[str, Any] = {
            "key": self.key,
            "device_type": self.device_type,
            "count": self.count,
            "self_cpu_time_total_us": self.self_cpu_time_total_us,
            "cpu_time_total_us": self.cpu_time_total_us,
        }
        if with_device:
            row["self_device_time_total_us"] = self.self_device_time_total_us
            row["device_time_total_us"] = self.device_time_total_us
        return row


def operator_rows(events: TraceEvents) -> list[OperatorRow]:
    """Aggregate every operator span that started inside a measured run, plus the device activities."""
    device_time = {correlation: sum(a.duration_us for a in work) for correlation, work in events.device_of.items()}
    rows: dict[tuple[str, str], OperatorRow] = {}
    measured_launches: set[int] = set()

    for view in events.threads.values():
        kept = view.op_runs >= 0
        measured = np.flatnonzero(view.launch_runs >= 0)  # positions in the view's launches
        measured_launches.update(events.launches[view.launches[position]].correlation for position in measured)
        _fold_ops(events, view, kept, measured, device_time, rows)

    for activity in events.device:
        if activity.correlation in measured_launches:
            row = rows.get((activity.name, "CUDA"))
            if row is None:
                row = rows[activity.name, "CUDA"] = OperatorRow(activity.name, "CUDA")
            row.count += 1
            row.self_device_time_total_us += activity.duration_us
            row.device_time_total_us += activity.duration_us
    return list(rows.values())


def key_averages(events: TraceEvents, limit: int = ROW_LIMIT) -> dict[str, list[dict[str, Any]]]:
    """Two bounded views of the operator table: top ``limit`` by CPU total and by device total.

    The device view is omitted when the trace has no device activity.
    """
    rows = operator_rows(events)
    with_device = events.has_device_data
    views = {"cpu_time_total": _top(rows, "cpu_time_total_us", limit, with_device)}
    if with_device:
        views["device_time_total"] = _top(rows, "device_time_total_us", limit, with_device)
    return views


def _top(rows: Sequence[OperatorRow], attribute: str, limit: int, with_device: bool) -> list[dict[str, Any]]:
    ranked = sorted(rows, key=lambda row: (-getattr(row, attribute), row.key, row.device_type))
    return [row.to_dict(with_device) for row in ranked[:limit] if getattr(row, attribute) > 0]


def _fold_ops(
    events: TraceEvents,
    view: ThreadView,
    kept: np.ndarray,
    launches: np.ndarray,
    device_time: Mapping[int, float],
    rows: dict[tuple[str, str], OperatorRow],
) -> None:
    """Add the ``kept`` operators of one thread (those inside a run) to ``rows``, with self and total times;
    ``launches``: the positions in the view of the launches made inside a run.

    One of the analysis pass's hottest steps (~10⁵ operators a capture), so it is array operations: the
    nesting comes from the model's index, and `numpy.bincount` sums each operator name's times (by its
    code) in trace order, as a loop adding them one by one would.
    """
    durations = view.op_durations_us
    children_first = view.op_order[::-1]
    parent = view.op_parents[children_first]
    counted = (parent >= 0) & kept[children_first] & kept[np.maximum(parent, 0)]
    child_cpu = np.bincount(parent[counted], weights=durations[children_first][counted], minlength=len(durations))
    distinct = events.ops.distinct_names
    kept_codes, kept_durations = events.ops.name_codes[view.ops][kept], durations[kept]
    counts = np.bincount(kept_codes, minlength=len(distinct))
    totals = np.bincount(kept_codes, weights=kept_durations, minlength=len(distinct)).tolist()
    own = np.maximum(kept_durations - child_cpu[kept], 0.0)
    selves = np.bincount(kept_codes, weights=own, minlength=len(distinct)).tolist()
    by_name = {key[0]: row for key, row in rows.items() if key[1] == "CPU"}
    for code in np.flatnonzero(counts).tolist():
        name = distinct[code]
        row = by_name.get(name)
        if row is None:
            row = by_name[name] = rows[name, "CPU"] = OperatorRow(name, "CPU")
        row.count += int(counts[code])
        row.cpu_time_total_us += totals[code]
        row.self_cpu_time_total_us += selves[code]
    if len(launches):
        _fold_device_time(events, view, kept, launches, device_time, by_name)


def _fold_device_time(
    events: TraceEvents,
    view: ThreadView,
    kept: np.ndarray,
    launches: np.ndarray,
    device_time: Mapping[int, float],
    by_name: dict[str, OperatorRow],
) -> None:
    """Device time of the kernels each operator launched: self (innermost operator) and total (ancestors too)."""
    keeps = kept.tolist()
    self_device = [0.0] * len(keeps)
    for position, owner in zip(launches.tolist(), view.launch_ops[launches].tolist(), strict=True):
        if owner >= 0 and keeps[owner]:
            self_device[owner] += device_time.get(events.launches[view.launches[position]].correlation, 0.0)
    total_device = list(self_device)
    parent_of = view.op_parents.tolist()
    for index in reversed(view.op_order.tolist()):  # children before parents: totals flow upwards
        parent = parent_of[index]
        if parent >= 0 and keeps[index] and keeps[parent]:
            total_device[parent] += total_device[index]
    names = events.ops.names
    for local, index in enumerate(view.ops.tolist()):
        if keeps[local]:
            row = by_name[names[index]]
            row.self_device_time_total_us += self_device[local]
            row.device_time_total_us += total_device[local]
