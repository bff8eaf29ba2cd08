"""Tables of one profile document for the viewer: pure functions from the document to DataFrames.

Only reading and arranging happens here (medians over runs, per-run rows, the trace's spans for one
run, suggest's targets and a tune folder's gains as rows); anything that compares two profiles
belongs to `aitune.compare`, every figure of a target to `aitune.suggest`.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Iterable

import msgspec
import pandas as pd
from msgspec import UNSET

from aitune.analysis.events import TraceEvents
from aitune.analysis.statistics import outlier_indices
from aitune.compare.loop_report import LoopReport
from aitune.markers import (
    parse_region_id,
    region_kind,
    region_path,
    run_span_name,
    span_region_id,
)
from aitune.report import ProfileDoc, headline_rows
from aitune.report.efficiency import region_efficiencies
from aitune.report.formatting import MISSING
from aitune.report.headline import RESIDUAL_LABEL, phase_rows
from aitune.report.key_averages import operator_rows
from aitune.report.memory import format_bytes, memory_rows
from aitune.report.model import as_profile, given
from aitune.report.phases import phase_figures
from aitune.report.ranks import rank_rows, regions_across_ranks
from aitune.suggest import UPPER_BOUND_CAP, Suggestions

RESIDUAL = RESIDUAL_LABEL
"""The path under which the residual (time outside every region) is listed beside the regions."""


REGION_COLUMNS = ["path", "region_id", "kind", "calls", "time_us", "fraction"]
RUN_COLUMNS = ["run_index", "wall_time_us", "cpu_time_us", "device_time_us", "outlier"]
OPERATOR_COLUMNS = ["key", "device_type", "count", "self_cpu_time_total_us", "cpu_time_total_us"]
WARNING_COLUMNS = ["code", "message", "source"]
MEMORY_COLUMNS = ["path", "device", "peak_live", "allocated", "freed", "allocator_peak", "peak_live_bytes"]
RANK_COLUMNS = ["rank", "median_us", "min_us", "max_us", "barrier_wait_us", "slowest_steps", "straggler_region"]
RANK_REGION_COLUMNS = ["region_id", "rank", "median_us", "slowest_rank", "imbalance"]
RUN_TIME = "(run time)"
"""The quantity a per-rank chart draws for the whole step, beside the regions."""
TIMELINE_COLUMNS = ["lane", "start_ms", "end_ms", "duration_ms"]
TARGET_COLUMNS = [
    "path",
    "share",
    "share_low",
    "share_high",
    "time_per_run_us",
    "calls_per_run",
    "upper_bound_speedup",
    "predicted_speedup",
    "predicted_region_speedup",
    "verdict",
]
REASON_COLUMNS = ["path", "code", "blocking", "message"]
ADVICE_COLUMNS = ["code", "message", "time_per_run_us", "share"]
GAIN_COLUMNS = [
    "path",
    "winner",
    "predicted_speedup",
    "realised_speedup",
    "predicted_region_speedup",
    "realised_region_speedup",
    "note",
]
TASK_GATE_COLUMN = "task_gate"  # only in a tune folder's table made at a reduced precision
WHOLE_MODEL = "(whole model)"


def _kind(meta_kind: str | None, region_id: str) -> str:
    """``managed`` for AOT/JIT regions (by metadata, else by id prefix), ``untuned`` otherwise."""
    managed = region_kind(meta_kind).managed or parse_region_id(region_id)[0].managed
    return "managed" if managed else "untuned"


def region_summary(doc: ProfileDoc, domain: str, keep: Collection[str] = ()) -> pd.DataFrame:
    """Per row of the headline (`aitune.report.headline_rows`), the median over runs of its calls, time and fraction.

    A region missing from a run counts as 0 in that run, so a region seen once is not overstated;
    a looked-through region's self time is a row of its own (``keep``: paths shown whole), and the
    residual comes last.
    """
    kinds = {meta.id: meta.kind for meta in as_profile(doc).regions}
    rows = [
        {
            "path": row.path,
            "region_id": row.label,
            "kind": "residual" if row.region_id is None else _kind(kinds.get(row.region_id), row.region_id),
            "calls": _median(row.calls),
            "time_us": _median(row.times_us),
            "fraction": row.share,
        }
        for row in headline_rows(doc, domain, keep)
    ]
    return pd.DataFrame(rows, columns=REGION_COLUMNS)


def run_timing(doc: ProfileDoc) -> pd.DataFrame:
    """One row per measured run (µs; device column empty without device data).

    Outliers are judged on wall time by the core's rule, so they are the runs its RUN_OUTLIERS warning names.
    """
    runs = as_profile(doc).runs
    walls = [given(run.timing.wall_time_us, run.timing.cpu_time_us) for run in runs]
    marked = set(outlier_indices(walls))
    rows = [
        (run.run_index, wall, run.timing.cpu_time_us, given(run.timing.device_time_us, None), index in marked)
        for index, (run, wall) in enumerate(zip(runs, walls, strict=True))
    ]
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


PHASE_COLUMNS = ["phase", "row", "time_us", "fraction", "tokens"]


def phase_table(doc: ProfileDoc) -> pd.DataFrame:
    """A generate-like profile's phases, medians per run: a ``(phase)`` row per phase (its share of the run),
    then its regions and residual (their shares of the phase); empty for other profiles."""
    rows = []
    for figure in phase_figures(doc):
        rows.append(
            {
                "phase": figure.name,
                "row": "(phase)",
                "time_us": figure.median_us,
                "fraction": figure.share,
                "tokens": figure.steps,
            }
        )
        rows += [
            {
                "phase": figure.name,
                "row": row.label,
                "time_us": _median(row.times_us),
                "fraction": row.share,
                "tokens": None,
            }
            for row in phase_rows(doc, figure.name)
        ]
    return pd.DataFrame(rows, columns=PHASE_COLUMNS)


def operator_table(doc: ProfileDoc) -> pd.DataFrame:
    """The document's key-averages rows (the CPU-sorted view, or the first view present), ours or AITune's."""
    frame = pd.DataFrame(msgspec.to_builtins(operator_rows(doc)))
    return frame if not frame.empty else pd.DataFrame(columns=OPERATOR_COLUMNS)


def memory_table(doc: ProfileDoc) -> pd.DataFrame:
    """Per region (and the whole run) and device: bytes allocated and freed (median per run), peak live and the
    allocator's peak (highest run), in words and ``peak_live_bytes`` to sort by; empty when the document has none."""
    rows = [
        (
            row.label,
            row.device,
            format_bytes(row.peak_live_bytes),
            format_bytes(row.allocated_bytes),
            format_bytes(row.freed_bytes),
            format_bytes(row.allocator_peak_bytes),
            row.peak_live_bytes,
        )
        for row in memory_rows(doc)
    ]
    return pd.DataFrame(rows, columns=MEMORY_COLUMNS)


EFFICIENCY_COLUMNS = [
    "region_id", "domain", "flops", "bytes", "counted_us", "uncounted_us", "flops_per_s", "bytes_per_s",
    "intensity", "fraction_of_roof", "bound", "mostly_uncounted",
]  # fmt: skip


def efficiency_table(doc: ProfileDoc) -> pd.DataFrame:
    """Each region with work: FLOPs, bytes, achieved rates, its place under the roofs (`aitune.report.efficiency`)."""
    return pd.DataFrame([item.to_dict() for item in region_efficiencies(doc)], columns=EFFICIENCY_COLUMNS)


def warning_table(doc: ProfileDoc) -> pd.DataFrame:
    """The document's warnings as rows of code, message and source."""
    warnings = as_profile(doc).warnings
    return pd.DataFrame([(w.code, w.message, w.source) for w in warnings], columns=WARNING_COLUMNS)


def rank_table(doc: ProfileDoc) -> pd.DataFrame:
    """A merged document's ranks, one row each (`aitune.report.ranks.rank_rows`); empty for a single capture."""
    return pd.DataFrame([vars(row) for row in rank_rows(doc)], columns=RANK_COLUMNS)


def rank_region_table(doc: ProfileDoc) -> pd.DataFrame:
    """Per quantity (`RUN_TIME`, then each region and the residual, largest first) and rank: its median (µs).

    Each row also says which rank is slowest at that quantity and its imbalance (max ÷ median across ranks).
    """
    ranks = as_profile(doc).ranks
    if ranks is UNSET or not rank_rows(doc):
        return pd.DataFrame(columns=RANK_REGION_COLUMNS)
    run = ranks.run_time
    quantities = [(RUN_TIME, run.median_us, run.slowest_rank, given(run.imbalance, None))]
    quantities += [
        (row.region_id, row.medians_us, row.slowest_rank, row.imbalance) for row in regions_across_ranks(doc)
    ]
    rows = [
        (name, rank, median, slowest, ratio)
        for name, medians, slowest, ratio in quantities
        for rank, median in enumerate(medians)
    ]
    return pd.DataFrame(rows, columns=RANK_REGION_COLUMNS)


def run_indices(doc: ProfileDoc) -> list[int]:
    """The measured runs' indices, in document order."""
    return [run.run_index for run in as_profile(doc).runs]


def timeline(events: TraceEvents, run_index: int) -> pd.DataFrame:
    """Region spans of one measured run, one lane per region, in ms from the run's start."""
    marker = run_span_name(run_index)
    run = next((span for span in events.runs if span.name == marker), None)
    if run is None:
        return pd.DataFrame(columns=TIMELINE_COLUMNS)
    rows = [
        {
            "lane": region_path(span_region_id(span.name)),
            "start_ms": (span.start_us - run.start_us) / 1000,
            "end_ms": (span.end_us - run.start_us) / 1000,
            "duration_ms": span.duration_us / 1000,
        }
        for span in (events.regions[i] for i in events.thread(run.thread).regions)
        if run.start_us <= span.start_us <= run.end_us
    ]
    return pd.DataFrame(rows, columns=TIMELINE_COLUMNS)


def _median(values: Iterable[float]) -> float:
    collected = list(values)
    return statistics.median(collected) if collected else 0.0


def target_table(suggestions: Suggestions) -> pd.DataFrame:
    """suggest's ranked targets, one row each, with `Suggestions.verdict`; an unbounded upper bound is NaN."""
    picked = suggestions.recommended()
    rows = [
        {
            **{column: getattr(target, column) for column in TARGET_COLUMNS[:-1]},
            "upper_bound_speedup": target.upper_bound_speedup if target.upper_bound_speedup < UPPER_BOUND_CAP else None,
            "verdict": suggestions.verdict(target, picked),
        }
        for target in suggestions.targets
    ]
    return pd.DataFrame(rows, columns=TARGET_COLUMNS)


def reason_table(suggestions: Suggestions) -> pd.DataFrame:
    """Every reason of every target, in the targets' rank order."""
    rows = [
        [target.path, reason.code, reason.blocking, reason.message]
        for target in suggestions.targets
        for reason in target.reasons
    ]
    return pd.DataFrame(rows, columns=REASON_COLUMNS)


def advice_table(suggestions: Suggestions) -> pd.DataFrame:
    """suggest's advice beyond modules (residual causes, entry-method code, first-call cost)."""
    rows = [[item.code, item.message, item.time_per_run_us, item.share] for item in suggestions.advice]
    return pd.DataFrame(rows, columns=ADVICE_COLUMNS)


def gain_table(report: LoopReport) -> pd.DataFrame:
    """Per region a tune folder tuned: its winner, predicted and realised gains, and why it was kept as it was.

    A region kept as it was has no realised gain (`RegionGain.realised_shown`): its change is noise. At a
    reduced precision, a ``task_gate`` column holds the task gate's verdict on each region it judged
    (`LoopReport.gate_verdict`), ``-`` on the others.
    """
    gated = report.task_gate is not None
    rows = [
        {
            **{column: getattr(gain, column) for column in GAIN_COLUMNS[:-1]},
            "path": gain.path or WHOLE_MODEL,
            "realised_speedup": gain.realised_shown[0],
            "realised_region_speedup": gain.realised_shown[1],
            "note": gain.note,
            **({TASK_GATE_COLUMN: report.gate_verdict(gain.path) or MISSING} if gated else {}),
        }
        for gain in report.regions
    ]
    return pd.DataFrame(rows, columns=[*GAIN_COLUMNS, TASK_GATE_COLUMN] if gated else GAIN_COLUMNS)
