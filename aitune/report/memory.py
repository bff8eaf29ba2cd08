"""The reader of a document's ``memory`` section that every view calls: rows per region and device, the
sentence that says where the memory comes from, and the one that says why there is none.

Over the runs the memory comes from, bytes allocated and freed are medians (one run's worth, as the
times are) and the peaks are the highest (a limit is met at its highest, not its median).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from aitune.markers import region_path
from aitune.report.document import LITE_LACKS, is_lite
from aitune.report.model import UNSET, MemoryRun, MemoryStats, Profile, ProfileLike, as_profile, given

WHOLE_RUN = "(whole run)"
"""The label of a run's own row: everything allocated on the run's thread while it ran."""


@dataclass(frozen=True)
class MemoryRow:
    """One region's (or the whole run's) memory on one device over the runs the memory comes from."""

    region_id: str | None  # None for the whole run
    label: str  # the region's path, or `WHOLE_RUN`
    device: str
    allocated_bytes: float  # median over runs
    freed_bytes: float  # median over runs
    peak_live_bytes: int  # highest over runs
    allocator_peak_bytes: int | None  # highest over runs, when the events give it

    @property
    def role(self) -> str:
        return "run" if self.region_id is None else "region"


def memory_rows(doc: ProfileLike) -> list[MemoryRow]:
    """The whole run's rows (one per device), then each region's in the order the runs first show them;
    [] when the document holds no measured memory (`memory_note` says why)."""
    runs = _memory_runs(as_profile(doc))
    if not runs:
        return []
    collected: dict[tuple[str | None, str], list[MemoryStats]] = {}
    for run in runs:
        for device, stats in run.devices.items():
            collected.setdefault((None, device), []).append(stats)
        for region in run.regions:
            for device, stats in region.devices.items():
                collected.setdefault((region.region_id, device), []).append(stats)
    ordered = sorted(collected.items(), key=lambda item: item[0][0] is not None)  # stable: run rows first
    return [_row(region, device, stats) for (region, device), stats in ordered]


def top_memory_rows(rows: list[MemoryRow], limit: int) -> tuple[list[MemoryRow], int]:
    """The whole run's rows, then the ``limit`` region rows of highest peak live bytes (ties by label), and
    how many region rows were left out."""
    regions = sorted((row for row in rows if row.role == "region"), key=lambda row: (-row.peak_live_bytes, row.label))
    return [row for row in rows if row.role == "run"] + regions[:limit], max(0, len(regions) - limit)


def _row(region: str | None, device: str, stats: list[MemoryStats]) -> MemoryRow:
    peaks = [item.allocator_peak_bytes for item in stats if item.allocator_peak_bytes is not UNSET]
    return MemoryRow(
        region_id=region,
        label=WHOLE_RUN if region is None else region_path(region),
        device=device,
        allocated_bytes=statistics.median(item.allocated_bytes for item in stats),
        freed_bytes=statistics.median(item.freed_bytes for item in stats),
        peak_live_bytes=max(item.peak_live_bytes for item in stats),
        allocator_peak_bytes=max(peaks) if peaks else None,
    )


def memory_note(doc: ProfileLike) -> str | None:
    """Why ``doc`` shows no memory, in the words every reader shows; None when it shows some."""
    record = as_profile(doc)
    if is_lite(record):
        return f"lite capture: {LITE_LACKS}"
    if record.memory is UNSET:
        return "memory not recorded (a document written before aitune recorded memory, or without operator data)"
    if not _memory_runs(record):
        return "no memory events in this trace: record it with torch.profiler.profile(profile_memory=True)"
    return None


def memory_source(doc: ProfileLike) -> str | None:
    """Which runs the memory comes from, in words; None when there is none."""
    record = as_profile(doc)
    runs = len(_memory_runs(record))
    if not runs:
        return None
    own = "; the measured runs' timing never paid for it"
    return {
        "operator_runs": f"memory from the {runs} operator run(s) of their own, after the measured runs{own}",
        "memory_run": f"memory from one run of its own before the measured runs{own}",
    }.get(record.memory.runs_from, f"memory from the {runs} measured run(s), whose trace recorded it")


def _memory_runs(record: Profile) -> list[MemoryRun]:
    """The runs the document's memory comes from; [] without memory or memory events."""
    return [] if record.memory is UNSET else given(record.memory.runs, [])


_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def format_bytes(value: float | None) -> str:
    """Bytes in binary units, three significant figures: ``1.95 MiB``; ``-`` when absent.

    >>> format_bytes(0), format_bytes(1000), format_bytes(2_048_000), format_bytes(None)
    ('0 B', '1000 B', '1.95 MiB', '-')
    """
    if value is None:
        return "-"
    scaled, unit = float(value), 0
    while abs(scaled) >= 1024 and unit < len(_UNITS) - 1:
        scaled, unit = scaled / 1024, unit + 1
    return f"{scaled:.0f} B" if unit == 0 else f"{scaled:.3g} {_UNITS[unit]}"
