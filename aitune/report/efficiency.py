"""How close each region runs to this machine's roofs: its work (``work`` on the operator runs'
regions and tree nodes, `aitune.analysis.region_work`) against ``environment.machine_peaks``.

For a region, over the runs that traced operators (medians): FLOPs and bytes of its counted
operators, its children's included; the time they took (device time with device data, else CPU);
the achieved FLOP/s and bytes/s over that time; the arithmetic intensity (FLOPs per byte); and the
roofline's verdict. The roof time is what the counted work needs at the machine's peaks — the
longer of FLOPs at the GEMM peak of their dtype and bytes at the copy bandwidth — and the fraction
of the roof is roof time ÷ measured time: 1 means the operators ran at the roof, 0.1 that they could
run ten times faster on paper. The uncounted time (operators without a formula) is beside it, never
read as zero work; a region whose operator time is mostly uncounted says so.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aitune.report.document import is_lite
from aitune.report.model import (
    UNSET,
    Domain,
    MachinePeak,
    Profile,
    ProfileLike,
    Run,
    TreeNode,
    UnsetType,
    Work,
    as_profile,
    given,
)

MOSTLY_UNCOUNTED = 0.5
"""A region whose uncounted time exceeds this share of its operator time is mostly uncounted."""
GPU_BACKEND, CPU_BACKEND = "cuda", "cpu"
"""The ``machine_peaks`` backends whose roofs a region's device time, or its CPU time, is measured against."""
FALLBACK_DTYPE = "float32"
"""The GEMM rate work of a dtype the machine has no rate for is timed at (else the best rate it has)."""


@dataclass(frozen=True)
class RegionEfficiency:
    """One region's place on the roofline (medians over the runs that traced operators)."""

    region_id: str
    domain: str  # "device" (kernels' time, the GPU's roofs) or "cpu"
    flops: float
    bytes: float
    counted_us: float
    uncounted_us: float
    roof_us: float | None  # None without machine peaks
    peak_flops_per_s: float | None
    bandwidth_bytes_per_s: float | None
    uncounted_operators: dict[str, float] = field(default_factory=dict)

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.counted_us * 1e6 if self.counted_us > 0 else 0.0

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / self.counted_us * 1e6 if self.counted_us > 0 else 0.0

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved."""
        return self.flops / self.bytes if self.bytes > 0 else 0.0

    @property
    def fraction_of_roof(self) -> float | None:
        """Roof time ÷ measured time of the counted operators; None without peaks or counted time."""
        if self.roof_us is None or self.counted_us <= 0:
            return None
        return self.roof_us / self.counted_us

    @property
    def bound(self) -> str | None:
        """``compute`` or ``memory``: which roof the region's intensity puts it under; None without peaks."""
        if not self.peak_flops_per_s or not self.bandwidth_bytes_per_s or self.flops <= 0:
            return None
        ridge = self.peak_flops_per_s / self.bandwidth_bytes_per_s
        return "compute" if self.intensity >= ridge else "memory"

    @property
    def uncounted_fraction(self) -> float:
        total = self.counted_us + self.uncounted_us
        return self.uncounted_us / total if total > 0 else 0.0

    @property
    def mostly_uncounted(self) -> bool:
        return self.uncounted_fraction > MOSTLY_UNCOUNTED

    def to_dict(self) -> dict[str, Any]:
        """Plain numbers for tables and the viewer (None where a figure cannot be had)."""
        return {
            "region_id": self.region_id,
            "domain": self.domain,
            "flops": self.flops,
            "bytes": self.bytes,
            "counted_us": self.counted_us,
            "uncounted_us": self.uncounted_us,
            "flops_per_s": self.flops_per_s,
            "bytes_per_s": self.bytes_per_s,
            "intensity": self.intensity,
            "fraction_of_roof": self.fraction_of_roof,
            "bound": self.bound,
            "mostly_uncounted": self.mostly_uncounted,
        }


def has_work(doc: ProfileLike) -> bool:
    """Whether ``doc`` holds work per region (a full capture whose operator runs recorded shapes)."""
    return any(_run_works(run) for run in _traced(as_profile(doc)))


def region_efficiencies(doc: ProfileLike) -> list[RegionEfficiency]:
    """Every region with work, the most counted time first; [] for a document without work."""
    record = as_profile(doc)
    per_region: dict[str, list[_SummedWork]] = {}
    for run in _traced(record):
        for region_id, work in _run_works(run).items():
            per_region.setdefault(region_id, []).append(work)
    peaks = roofs(record)
    found = [_efficiency(region_id, works, peaks) for region_id, works in per_region.items()]
    return sorted(found, key=lambda item: (-(item.counted_us + item.uncounted_us), item.region_id))


def efficiency_by_region(doc: ProfileLike) -> dict[str, RegionEfficiency]:
    """`region_efficiencies` keyed by region id."""
    return {item.region_id: item for item in region_efficiencies(doc)}


def roofs(doc: ProfileLike) -> dict[str, MachinePeak]:
    """The document's measured roofs by backend (``cpu``, ``cuda``); {} when it has none."""
    environment = as_profile(doc).environment
    return {} if environment is UNSET else given(environment.machine_peaks, {})


def _traced(record: Profile) -> list[Run]:
    return [] if is_lite(record) else record.traced_runs()


@dataclass(frozen=True)
class _SummedWork:
    """`Work` records added up (a region's over its subtree, or over its places in a run's tree), key by key as
    the records hold them: a device time stays `UNSET` until a record with one is added."""

    flops: int = 0
    bytes: int = 0
    counted_cpu_time_us: float = 0
    uncounted_cpu_time_us: float = 0
    counted_device_time_us: float | UnsetType = UNSET
    uncounted_device_time_us: float | UnsetType = UNSET
    flops_by_dtype: Mapping[str, float] = field(default_factory=dict)
    uncounted_operators: Mapping[str, float] = field(default_factory=dict)

    def plus(self, work: Work | _SummedWork) -> _SummedWork:
        return _SummedWork(
            self.flops + work.flops,
            self.bytes + work.bytes,
            self.counted_cpu_time_us + work.counted_cpu_time_us,
            self.uncounted_cpu_time_us + work.uncounted_cpu_time_us,
            _plus(self.counted_device_time_us, work.counted_device_time_us),
            _plus(self.uncounted_device_time_us, work.uncounted_device_time_us),
            _merged(self.flops_by_dtype, work.flops_by_dtype),
            _merged(self.uncounted_operators, work.uncounted_operators),
        )

    def time_us(self, domain: Domain, counted: bool) -> float:
        """The counted (or uncounted) operators' time in ``domain``; 0 where no record had it."""
        if domain == "device":
            value = self.counted_device_time_us if counted else self.uncounted_device_time_us
        else:
            value = self.counted_cpu_time_us if counted else self.uncounted_cpu_time_us
        return float(given(value, 0))


_NO_WORK = _SummedWork()


def _plus(total: float | UnsetType, value: float | UnsetType) -> float | UnsetType:
    return total if value is UNSET else given(total, 0) + value


def _merged(total: Mapping[str, float], more: Mapping[str, float]) -> dict[str, float]:
    merged = dict(total)
    for name, value in more.items():
        merged[name] = merged.get(name, 0) + value
    return merged


def _run_works(run: Run) -> dict[str, _SummedWork]:
    """Each region's work in one run, its children's included (tree nodes summed up their subtrees)."""
    found: dict[str, _SummedWork] = {}
    if run.tree is not UNSET:
        for node in run.tree:
            _subtree(node, found)
    else:
        for share in run.regions:
            if share.work is not UNSET:
                found[share.region_id] = _NO_WORK.plus(share.work)
    return found


def _subtree(node: TreeNode, found: dict[str, _SummedWork]) -> _SummedWork | None:
    """The work of ``node``'s subtree (None: no node in it has work), each node's also added to ``found``."""
    total = None if node.work is UNSET else _NO_WORK.plus(node.work)
    for child in node.children:
        if (below := _subtree(child, found)) is not None:  # a child without work adds nothing, not zeros
            total = (_NO_WORK if total is None else total).plus(below)
    if total is not None:
        found[node.region_id] = found.get(node.region_id, _NO_WORK).plus(total)
    return total


def _efficiency(region_id: str, works: list[_SummedWork], peaks: Mapping[str, MachinePeak]) -> RegionEfficiency:
    device = any(work.counted_device_time_us is not UNSET for work in works) and GPU_BACKEND in peaks
    domain: Domain = "device" if device else "cpu"
    flops = statistics.median(float(work.flops) for work in works)
    moved = statistics.median(float(work.bytes) for work in works)
    by_dtype = {name: statistics.median(work.flops_by_dtype.get(name, 0) for work in works) for name in _names(works)}
    roof = peaks.get(GPU_BACKEND if device else CPU_BACKEND)
    roof_us = peak = bandwidth = None
    if roof is not None:
        rates = {name: float(rate) for name, rate in roof.gemm_flops_per_s.items() if rate > 0}
        bandwidth = float(roof.copy_bytes_per_s) or None
        fallback = rates.get(FALLBACK_DTYPE) or max(rates.values(), default=0.0)
        if fallback and bandwidth:
            compute_s = sum(count / rates.get(name, fallback) for name, count in by_dtype.items())
            roof_us = max(compute_s, moved / bandwidth) * 1e6
            peak = flops / compute_s if compute_s > 0 else fallback
    return RegionEfficiency(
        region_id,
        domain,
        flops,
        moved,
        statistics.median(work.time_us(domain, counted=True) for work in works),
        statistics.median(work.time_us(domain, counted=False) for work in works),
        roof_us,
        peak,
        bandwidth,
        dict(sorted(works[0].uncounted_operators.items(), key=lambda item: -item[1])),
    )


def _names(works: Iterable[_SummedWork]) -> list[str]:
    return sorted({name for work in works for name in work.flops_by_dtype})
