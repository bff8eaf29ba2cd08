"""The operator table ("key averages"): per operator name, counts and self/total times over the measured runs.

Built from the trace's CPU operator spans and the device work they launched, like torch's
``key_averages()`` but without building torch's event objects.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aitune.analysis.events import TraceEvents
from aitune.analysis.intervals import innermost_enclosing, nesting_order, parents

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
    """Aggregate every operator span that started inside a measured run, plus device activities."""
    device_by_correlation: dict[int, float] = defaultdict(float)
    for activity in events.device:
        device_by_correlation[activity.correlation] += activity.duration_us
    rows: dict[tuple[str, str], OperatorRow] = {}

    by_thread: dict[Any, list[int]] = defaultdict(list)
    for index, op in enumerate(events.ops):
        by_thread[op.thread].append(index)
    for thread, indices in by_thread.items():
        thread_runs = [run for run in events.runs if run.thread == thread]
        in_run = innermost_enclosing(thread_runs, [events.ops[i].start_us for i in indices])
        ops = [events.ops[i] for i, run in zip(indices, in_run, strict=True) if run is not None]
        launches = [launch for launch in events.launches if launch.thread == thread]
        _fold_ops(ops, launches, device_by_correlation, rows)

    measured = {
        launch.correlation
        for launch in events.launches
        if any(run.thread == launch.thread and run.start_us <= launch.start_us <= run.end_us for run in events.runs)
    }
    for activity in events.device:
        if activity.correlation in measured:
            row = rows.setdefault((activity.name, "CUDA"), OperatorRow(activity.name, "CUDA"))
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


def _fold_ops(ops: Sequence[Any], launches: Sequence[Any], device_by_correlation: dict[int, float], rows: dict) -> None:
    parent_of = parents(ops)
    child_cpu = [0.0] * len(ops)
    self_device = [0.0] * len(ops)
    owners = innermost_enclosing(ops, [launch.start_us for launch in launches])
    for launch, owner in zip(launches, owners, strict=True):
        if owner is not None:
            self_device[owner] += device_by_correlation.get(launch.correlation, 0.0)
    total_device = list(self_device)
    for index in reversed(nesting_order(ops)):
        parent = parent_of[index]
        if parent is not None:
            child_cpu[parent] += ops[index].duration_us
            total_device[parent] += total_device[index]
    for index, op in enumerate(ops):
        row = rows.setdefault((op.name, "CPU"), OperatorRow(op.name, "CPU"))
        row.count += 1
        row.cpu_time_total_us += op.duration_us
        row.self_cpu_time_total_us += max(0.0, op.duration_us - child_cpu[index])
        row.self_device_time_total_us += self_device[index]
        row.device_time_total_us += total_device[index]
