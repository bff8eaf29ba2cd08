"""One stored run: what the history keeps of a profile document, as a frozen record built by pure functions.

A run's *workload* is what was measured (the target's type and root, the input's signature, the
scenarios); its *machine* is where (architecture, CPU count, torch, devices, threads). Two runs are
comparable only when both match; `machine_differences` names the fields that do not.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from aitune.report.document import scenario_names
from aitune.report.headline import headline_rows
from aitune.report.model import UNSET, Profile, ProfileLike, as_profile, given
from aitune.report.samples import DOMAINS, has_device_time, run_samples

RUN_TIME = "(run time)"
"""The path under which a run's own time is kept beside its headline rows."""

MACHINE_FIELDS = ("machine", "cpu_count", "torch", "cuda", "devices", "torch_threads")
"""The environment fields (of `aitune.report.model.Environment`) that make two runs comparable; `history check`
refuses a mix unless asked."""


@dataclass(frozen=True)
class Series:
    """One row of a run: a headline row (or the run time) and its time in each measured run (µs)."""

    path: str
    label: str
    role: str  # "run", "region", "self" or "residual"
    times_us: tuple[float, ...]

    @property
    def median_us(self) -> float:
        return statistics.median(self.times_us) if self.times_us else 0.0


@dataclass(frozen=True)
class RunRecord:
    """What the history keeps of one profile: identity, provenance, and the samples a check compares."""

    created_at: str
    workload: str  # a digest of the workload's identity (`workload_identity`)
    workload_label: str  # the target's type, for people
    machine: str  # a digest of the machine's fields (`machine_fields`)
    environment: Mapping[str, Any]  # the machine's fields as the document gave them
    domain: str
    series: tuple[Series, ...]  # the run time first, then the headline rows
    peak_memory_bytes: int | None = None
    commit: str | None = None
    branch: str | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)

    @property
    def run_time(self) -> Series:
        return self.series[0]


def workload_identity(doc: ProfileLike) -> dict[str, Any]:
    """What was measured: the target's type and root, each input's path, shape and dtype, the scenarios."""
    record = as_profile(doc)
    signature = [
        {"path": item.path, "shape": given(item.shape, None), "dtype": given(item.dtype, None)}
        for item in given(record.input.signature, [])
    ]
    return {
        "target": {"type": given(record.target.type, None), "root": given(record.target.root, None)},
        "input": signature,
        "scenarios": scenario_names(record),
    }


def machine_fields(doc: ProfileLike) -> dict[str, Any]:
    """The `MACHINE_FIELDS` of the document's environment (absent ones as None)."""
    environment = as_profile(doc).environment
    if environment is UNSET:
        return dict.fromkeys(MACHINE_FIELDS)
    return {key: given(getattr(environment, key), None) for key in MACHINE_FIELDS}


def digest(value: Any) -> str:
    """A short stable digest of a JSON value (keys sorted), to group runs by."""
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def machine_differences(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> list[str]:
    """The machine fields that differ, as ``torch 2.13.0 vs 2.11.0``."""
    return [f"{key} {ours.get(key)} vs {theirs.get(key)}" for key in MACHINE_FIELDS if ours.get(key) != theirs.get(key)]


def record_of(
    doc: ProfileLike,
    *,
    commit: str | None = None,
    branch: str | None = None,
    tags: Sequence[str] = (),
    domain: str | None = None,
) -> RunRecord:
    """The record of a validated profile document, in ``domain`` (default: device when it has device time)."""
    record = as_profile(doc)
    chosen = domain or ("device" if has_device_time(record) else "cpu")
    if chosen not in DOMAINS:
        raise ValueError(f"unknown domain {chosen!r}")
    run_time = Series(RUN_TIME, RUN_TIME, "run", tuple(run_samples(record, chosen)))
    rows = tuple(Series(row.path, row.label, row.role, tuple(row.times_us)) for row in headline_rows(record, chosen))
    machine = machine_fields(record)
    return RunRecord(
        created_at=record.created_at,
        workload=digest(workload_identity(record)),
        workload_label=given(record.target.type, "") or "?",
        machine=digest(machine),
        environment=machine,
        domain=chosen,
        series=(run_time, *rows),
        peak_memory_bytes=_peak_memory(record),
        commit=commit,
        branch=branch,
        tags=tuple(tags),
    )


def _peak_memory(record: Profile) -> int | None:
    """The largest peak live bytes over runs and devices, when the document measured memory."""
    runs = [] if record.memory is UNSET else given(record.memory.runs, [])
    return max((stats.peak_live_bytes for run in runs for stats in run.devices.values()), default=None)
