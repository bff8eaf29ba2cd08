"""The rows of the report's phase, memory and efficiency sections as plain text cells, read once for the
Markdown and the HTML report alike, so the two show the same figures; each renderer escapes every cell
its own way (`aitune.report.safe_text`) and marks the rows of its own (the residual, the whole run) with
the ``emphasis`` it passes in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aitune.report.efficiency import RegionEfficiency, region_efficiencies, roofs
from aitune.report.formatting import MISSING, ms, percent, si
from aitune.report.headline import phase_rows
from aitune.report.memory import format_bytes, memory_rows, memory_source, top_memory_rows
from aitune.report.model import ProfileLike
from aitune.report.phases import phase_figures

Emphasis = Callable[[str], Any]
"""How a renderer marks a row label it wrote itself (``_(residual)_`` in Markdown), never a document's."""

PHASE_HEADER = ["Phase", "Median (ms)", "Share of run", "Tokens"]
PHASE_SHARE_TITLE = "Region (CPU share of the phase)"
PHASE_RESIDUAL_NOTE = (
    "The residual of a phase is its time outside these regions: the spanning call's own work included."
)
MEMORY_HEADER = ["Region", "Device", "Allocated", "Freed", "Peak live", "Allocator peak"]
MEMORY_ROWS = 25
"""Regions the memory table shows, highest peak first: a pipeline captured deep has hundreds."""
EFFICIENCY_HEADER = [
    "Region", "FLOPs", "Bytes", "Counted ms", "Achieved", "FLOP/B", "% of roof", "Bound", "Uncounted ms",
]  # fmt: skip
NO_WORK = "No operator shapes recorded in this profile: no work per region to count."
NO_PEAKS = "No machine peaks in this profile: achieved rates only, no % of peak."


def phase_table(doc: ProfileLike) -> list[tuple[Any, ...]]:
    """Each phase (`aitune.report.phases.phase_figures`): its median time, share of the run and tokens."""
    return [(figure.name, ms(figure.median_us), percent(figure.share), figure.steps) for figure in phase_figures(doc)]


def phase_share_table(doc: ProfileLike, emphasis: Emphasis) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The phases (the columns after the region), and per region (the residual last) its CPU share of each."""
    by_phase = {
        figure.name: {(row.role, row.label): row for row in phase_rows(doc, figure.name)}
        for figure in phase_figures(doc)
    }
    keys = dict.fromkeys(key for rows in by_phase.values() for key in rows)
    ordered = sorted(keys, key=lambda key: key[0] == "residual")  # stable: the regions in order, the residual last
    rows = [
        (
            emphasis(label) if role == "residual" else label,
            *(percent(rows[role, label].share) if (role, label) in rows else MISSING for rows in by_phase.values()),
        )
        for role, label in ordered
    ]
    return list(by_phase), rows


def memory_lead(doc: ProfileLike) -> str:
    """Where the memory comes from and what each column means."""
    return (
        f"{memory_source(doc) or ''}. Allocated and freed: median per run; peak live: the most bytes a region's own "
        "allocations held at once, highest run; allocator peak: the allocator's own live total at its highest "
        "while the region ran."
    )


def memory_table(doc: ProfileLike, emphasis: Emphasis) -> tuple[list[tuple[Any, ...]], int]:
    """The whole run's rows, then the `MEMORY_ROWS` regions of highest peak (`aitune.report.memory`), and how
    many region rows were left out; ([], 0) when the document holds no memory."""
    shown, hidden = top_memory_rows(memory_rows(doc), MEMORY_ROWS)
    rows = [
        (
            emphasis(row.label) if row.role == "run" else row.label,
            row.device,
            format_bytes(row.allocated_bytes),
            format_bytes(row.freed_bytes),
            format_bytes(row.peak_live_bytes),
            format_bytes(row.allocator_peak_bytes),
        )
        for row in shown
    ]
    return rows, hidden


def roof_lines(doc: ProfileLike) -> list[str]:
    """The machine's measured roofs, one line per backend; `NO_PEAKS` when the document has none."""
    return [
        f"Roofs ({backend}): GEMM "
        + ", ".join(f"{name} {si(rate, 'FLOP/s')}" for name, rate in roof.gemm_flops_per_s.items())
        + f"; copy {si(roof.copy_bytes_per_s, 'B/s')} — {roof.source}"
        for backend, roof in roofs(doc).items()
    ] or [NO_PEAKS]


def efficiency_table(doc: ProfileLike) -> list[tuple[Any, ...]]:
    """Each region with work (`aitune.report.efficiency`): FLOPs, bytes, achieved rate, place under the roofs."""
    return [
        (
            item.region_id,
            si(item.flops, "FLOP"),
            si(item.bytes, "B"),
            ms(item.counted_us),
            si(item.flops_per_s, "FLOP/s") if item.flops else MISSING,
            f"{item.intensity:.1f}" if item.flops else MISSING,
            percent(item.fraction_of_roof),
            item.bound or MISSING,
            ms(item.uncounted_us),
        )
        for item in region_efficiencies(doc)
    ]


def uncounted_notes(doc: ProfileLike) -> list[tuple[str, str]]:
    """Per region whose time is mostly uncounted: its id, and a sentence naming up to three such operators."""
    return [(item.region_id, _uncounted(item)) for item in region_efficiencies(doc) if item.mostly_uncounted]


def _uncounted(item: RegionEfficiency) -> str:
    names = ", ".join(list(item.uncounted_operators)[:3]) or "operators without a formula"
    return (
        f"{percent(item.uncounted_fraction)} of its operator time is uncounted ({names}): its work is not known, "
        "not zero."
    )
