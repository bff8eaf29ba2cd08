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

from aitune.report.document import operator_runs

MOSTLY_UNCOUNTED = 0.5
"""A region whose uncounted time exceeds this share of its operator time is mostly uncounted."""


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


def machine_peaks(doc: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The document's measured roofs by backend (``cpu``, ``cuda``); {} when it has none."""
    peaks = doc.get("environment", {}).get("machine_peaks")
    return dict(peaks) if isinstance(peaks, Mapping) else {}


def has_work(doc: Mapping[str, Any]) -> bool:
    """Whether ``doc`` holds work per region (a full capture whose operator runs recorded shapes)."""
    return any(work for run in _traced(doc) for work in _run_works(run).values())


def region_efficiencies(doc: Mapping[str, Any]) -> list[RegionEfficiency]:
    """Every region with work, the most counted time first; [] for a document without work."""
    per_region: dict[str, list[dict[str, Any]]] = {}
    for run in _traced(doc):
        for region_id, work in _run_works(run).items():
            per_region.setdefault(region_id, []).append(work)
    peaks = machine_peaks(doc)
    found = [_efficiency(region_id, works, peaks) for region_id, works in per_region.items()]
    return sorted(found, key=lambda item: (-(item.counted_us + item.uncounted_us), item.region_id))


def efficiency_by_region(doc: Mapping[str, Any]) -> dict[str, RegionEfficiency]:
    """`region_efficiencies` keyed by region id."""
    return {item.region_id: item for item in region_efficiencies(doc)}


def _traced(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [] if doc.get("profiler", {}).get("mode") == "lite" else list(operator_runs(doc))


def _run_works(run: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each region's work in one run, its children's included (tree nodes summed up their subtrees)."""
    found: dict[str, dict[str, Any]] = {}
    if "tree" in run:
        for node in run["tree"]:
            _subtree(node, found)
    else:
        for share in run.get("regions", ()):
            if "work" in share:
                found[share["region_id"]] = _add({}, share["work"])
    return found


def _subtree(node: Mapping[str, Any], found: dict[str, dict[str, Any]]) -> dict[str, Any]:
    total = _add({}, node["work"]) if "work" in node else {}
    for child in node.get("children", ()):
        if below := _subtree(child, found):  # a child without work adds nothing, not zeros
            total = _add(total, below)
    if total:
        found[node["region_id"]] = _add(found.get(node["region_id"], {}), total)
    return total


_SUMMED = (
    "flops",
    "bytes",
    "counted_cpu_time_us",
    "uncounted_cpu_time_us",
    "counted_device_time_us",
    "uncounted_device_time_us",
)


def _add(total: dict[str, Any], work: Mapping[str, Any]) -> dict[str, Any]:
    result = dict(total)
    for key in _SUMMED:
        if key in work:
            result[key] = result.get(key, 0) + work[key]
    for key in ("flops_by_dtype", "uncounted_operators"):
        merged = dict(result.get(key, {}))
        for name, value in work.get(key, {}).items():
            merged[name] = merged.get(name, 0) + value
        result[key] = merged
    return result


def _efficiency(
    region_id: str, works: list[dict[str, Any]], peaks: Mapping[str, Mapping[str, Any]]
) -> RegionEfficiency:
    device = any("counted_device_time_us" in work for work in works) and "cuda" in peaks
    domain, backend = ("device", "cuda") if device else ("cpu", "cpu")
    prefix = "device" if device else "cpu"

    def median(key: str) -> float:
        return statistics.median(float(work.get(key, 0)) for work in works)

    flops, moved = median("flops"), median("bytes")
    by_dtype = {
        name: statistics.median(w.get("flops_by_dtype", {}).get(name, 0) for w in works) for name in _names(works)
    }
    roof = peaks.get(backend)
    roof_us = peak = bandwidth = None
    if roof:
        rates = {name: float(rate) for name, rate in roof.get("gemm_flops_per_s", {}).items() if rate > 0}
        bandwidth = float(roof.get("copy_bytes_per_s", 0)) or None
        fallback = rates.get("float32") or max(rates.values(), default=0.0)
        if fallback and bandwidth:
            compute_s = sum(count / rates.get(name, fallback) for name, count in by_dtype.items())
            roof_us = max(compute_s, moved / bandwidth) * 1e6
            peak = flops / compute_s if compute_s > 0 else fallback
    uncounted = works[0].get("uncounted_operators", {})
    return RegionEfficiency(
        region_id,
        domain,
        flops,
        moved,
        median(f"counted_{prefix}_time_us"),
        median(f"uncounted_{prefix}_time_us"),
        roof_us,
        peak,
        bandwidth,
        dict(sorted(uncounted.items(), key=lambda item: -item[1])),
    )


def _names(works: Iterable[Mapping[str, Any]]) -> list[str]:
    return sorted({name for work in works for name in work.get("flops_by_dtype", {})})
