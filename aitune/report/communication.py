"""The communication summary every reader shows: median per run of each region's, the residual's and the run's.

Read from the ``communication`` objects of a document (`aitune.analysis.communication`); a document
without them has no summary, so readers show nothing for it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from aitune.report.headline import RESIDUAL_LABEL
from aitune.report.model import UNSET, Communication, ProfileLike, UnsetType, as_profile

COMMUNICATION_KEYS = ("cpu_time_us", "device_time_us", "bytes")
"""The per-share keys, in the order readers show them; a document has ``cpu_time_us`` and may lack the others."""

COMMUNICATION_HEADERS = {"cpu_time_us": "CPU in flight (ms)", "device_time_us": "NCCL kernels (ms)", "bytes": "Bytes"}
"""The column title of each key, in every reader."""

RUN_LABEL = "(run)"


@dataclass(frozen=True)
class CommunicationRow:
    """One row: a region of ``runs[i].regions``, the residual or the whole run, with medians over the runs."""

    label: str  # the region id, `RESIDUAL_LABEL` or `RUN_LABEL`
    role: str  # "region", "residual" or "run"
    medians: dict[str, float]  # by `COMMUNICATION_KEYS` present in the document


@dataclass(frozen=True)
class CommunicationSummary:
    rows: list[CommunicationRow]
    keys: list[str]  # the `COMMUNICATION_KEYS` the document has
    device_overlap_us: float | None  # median per run; None without device data
    device_overlap_fraction: float | None


def communication_summary(doc: ProfileLike) -> CommunicationSummary | None:
    """The summary of ``doc``'s communication; None when its runs have none.

    A region a run did not enter counts 0 in that run, as in the headline.
    """
    runs = [run for run in as_profile(doc).runs if run.communication is not UNSET]
    if not runs:
        return None
    run_figures = [_figures(run.communication) for run in runs]
    keys = [key for key in COMMUNICATION_KEYS if key in run_figures[0]]
    by_run = [{share.region_id: _figures(share.communication) for share in run.regions} for run in runs]
    shares = [
        (region_id, "region", [regions.get(region_id, {}) for regions in by_run])
        for region_id in dict.fromkeys(region_id for regions in by_run for region_id in regions)
    ]
    shares.append((RESIDUAL_LABEL, "residual", [_figures(run.residual.communication) for run in runs]))
    shares.append((RUN_LABEL, "run", run_figures))
    rows = [
        CommunicationRow(label, role, {key: statistics.median(value.get(key, 0) for value in values) for key in keys})
        for label, role, values in shares
    ]
    overlap_us = _median_of_all([run.communication.device_overlap_us for run in runs])
    overlap_fraction = _median_of_all([run.communication.device_overlap_fraction for run in runs])
    return CommunicationSummary(rows, keys, overlap_us, overlap_fraction)


def _figures(communication: Communication | UnsetType) -> dict[str, float]:
    """The communication's figures by `COMMUNICATION_KEYS`, those it lacks left out; {} for none."""
    if communication is UNSET:
        return {}
    values = (communication.cpu_time_us, communication.device_time_us, communication.bytes)
    return {key: value for key, value in zip(COMMUNICATION_KEYS, values, strict=True) if value is not UNSET}


def _median_of_all(values: list[float | UnsetType]) -> float | None:
    """The median of a run-level figure over the runs; None when a run lacks it (no device data)."""
    present = [value for value in values if value is not UNSET]
    return statistics.median(present) if len(present) == len(values) else None
