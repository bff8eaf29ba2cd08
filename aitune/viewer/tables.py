"""Tables of one profile document for the viewer: pure functions from the document to DataFrames.

Only reading and arranging happens here (medians over runs, per-run rows, the trace's spans for one
run, suggest's targets and a tune folder's gains as rows); anything that compares two profiles
belongs to `aitune.compare`, every figure of a target to `aitune.suggest`.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Iterable

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
from aitune.report import headline_rows
from aitune.report.efficiency import region_efficiencies
from aitune.report.formatting import MISSING
from aitune.report.headline import RESIDUAL_LABEL, phase_rows
from aitune.report.key_averages import operator_rows
from aitune.report.memory import format_bytes, memory_rows
from aitune.report.model import ProfileLike, as_profile, given, json_form
from aitune.report.phases import phase_figures
from aitune.report.ranks import rank_rows, regions_across_ranks
from aitune.suggest import UPPER_BOUND_CAP, Suggestions

RESIDUAL = RESIDUAL_LABEL
"""The path under which the residual (time outside every region) is listed beside the regions."""


class Column:
    """The name of every column of the viewer's frames, each written once: `tables`, `tree`, `trends` and the store
    build the frames with them, the figures and views read them. Where a frame's rows are records (an operator row,
    a rank, a target, a gain, a region's efficiency), a column is named as the record's field."""

    PATH = "path"
    REGION_ID = "region_id"
    KIND = "kind"
    CALLS = "calls"
    TIME_US = "time_us"
    FRACTION = "fraction"
    SIDE = "side"  # which profile of the pair a row comes from (`aitune.viewer.store.SIDES`), added by the store
    RUN_INDEX = "run_index"
    OUTLIER = "outlier"
    KEY = "key"
    DEVICE_TYPE = "device_type"
    COUNT = "count"
    SELF_CPU_TIME_TOTAL_US = "self_cpu_time_total_us"
    CPU_TIME_TOTAL_US = "cpu_time_total_us"
    BEFORE_US = "before_us"
    AFTER_US = "after_us"
    DELTA_US = "delta_us"
    CODE = "code"
    MESSAGE = "message"
    SOURCE = "source"
    STATUS = "status"  # a warning's: present (one profile), new, gone or persisting
    DEVICE = "device"
    PEAK_LIVE = "peak_live"
    ALLOCATED = "allocated"
    FREED = "freed"
    ALLOCATOR_PEAK = "allocator_peak"
    PEAK_LIVE_BYTES = "peak_live_bytes"
    RANK = "rank"
    MEDIAN_US = "median_us"
    MIN_US = "min_us"
    MAX_US = "max_us"
    BARRIER_WAIT_US = "barrier_wait_us"
    SLOWEST_STEPS = "slowest_steps"
    STRAGGLER_REGION = "straggler_region"
    SLOWEST_RANK = "slowest_rank"
    IMBALANCE = "imbalance"
    LANE = "lane"
    START_MS = "start_ms"
    END_MS = "end_ms"
    DURATION_MS = "duration_ms"
    SHARE = "share"
    SHARE_LOW = "share_low"
    SHARE_HIGH = "share_high"
    TIME_PER_RUN_US = "time_per_run_us"
    CALLS_PER_RUN = "calls_per_run"
    UPPER_BOUND_SPEEDUP = "upper_bound_speedup"
    PREDICTED_SPEEDUP = "predicted_speedup"
    PREDICTED_REGION_SPEEDUP = "predicted_region_speedup"
    VERDICT = "verdict"
    BLOCKING = "blocking"
    WINNER = "winner"
    REALISED_SPEEDUP = "realised_speedup"
    REALISED_REGION_SPEEDUP = "realised_region_speedup"
    NOTE = "note"
    TASK_GATE = "task_gate"  # only in a tune folder's table made at a reduced precision
    PHASE = "phase"
    ROW = "row"
    TOKENS = "tokens"
    DOMAIN = "domain"
    FLOPS = "flops"
    BYTES = "bytes"
    COUNTED_US = "counted_us"
    UNCOUNTED_US = "uncounted_us"
    FLOPS_PER_S = "flops_per_s"
    BYTES_PER_S = "bytes_per_s"
    INTENSITY = "intensity"
    FRACTION_OF_ROOF = "fraction_of_roof"
    SHARE_OF_ROOF = "share_of_roof"  # the efficiency table's fraction_of_roof as shown: a share* is a percentage
    BOUND = "bound"
    MOSTLY_UNCOUNTED = "mostly_uncounted"
    REGION = "region"  # the region tree's path, indented by its depth
    DEPTH = "depth"
    TOTAL_US = "total_us"
    SELF_US = "self_us"
    POSITION = "position"  # a stored run's place in a trend, the oldest 0
    RUN_ID = "run_id"
    COMMIT = "commit"
    RECORDED = "recorded"
    MS = "ms"


RUN_TIMES = ("wall", "cpu", "device")
"""What a run's time is measured as: each is a column of the run table (`time_column`)."""


def time_column(measured: str) -> str:
    """The run table's column of a run's time measured as one of `RUN_TIMES` (µs)."""
    return f"{measured}_time_us"


REGION_COLUMNS = [Column.PATH, Column.REGION_ID, Column.KIND, Column.CALLS, Column.TIME_US, Column.FRACTION]
RUN_COLUMNS = [Column.RUN_INDEX, *map(time_column, RUN_TIMES), Column.OUTLIER]
OPERATOR_COLUMNS = [
    Column.KEY, Column.DEVICE_TYPE, Column.COUNT, Column.SELF_CPU_TIME_TOTAL_US, Column.CPU_TIME_TOTAL_US,
]  # fmt: skip
OPERATOR_CHANGE_COLUMNS = [Column.KEY, Column.DEVICE_TYPE, Column.BEFORE_US, Column.AFTER_US, Column.DELTA_US]
WARNING_COLUMNS = [Column.CODE, Column.MESSAGE, Column.SOURCE]
MEMORY_COLUMNS = [
    Column.PATH, Column.DEVICE, Column.PEAK_LIVE, Column.ALLOCATED, Column.FREED, Column.ALLOCATOR_PEAK,
    Column.PEAK_LIVE_BYTES,
]  # fmt: skip
RANK_COLUMNS = [
    Column.RANK, Column.MEDIAN_US, Column.MIN_US, Column.MAX_US, Column.BARRIER_WAIT_US, Column.SLOWEST_STEPS,
    Column.STRAGGLER_REGION,
]  # fmt: skip
RANK_REGION_COLUMNS = [Column.REGION_ID, Column.RANK, Column.MEDIAN_US, Column.SLOWEST_RANK, Column.IMBALANCE]
RUN_TIME = "(run time)"
"""The quantity a per-rank chart draws for the whole step, beside the regions."""
TIMELINE_COLUMNS = [Column.LANE, Column.START_MS, Column.END_MS, Column.DURATION_MS]
TARGET_COLUMNS = [
    Column.PATH,
    Column.SHARE,
    Column.SHARE_LOW,
    Column.SHARE_HIGH,
    Column.TIME_PER_RUN_US,
    Column.CALLS_PER_RUN,
    Column.UPPER_BOUND_SPEEDUP,
    Column.PREDICTED_SPEEDUP,
    Column.PREDICTED_REGION_SPEEDUP,
    Column.VERDICT,
]
REASON_COLUMNS = [Column.PATH, Column.CODE, Column.BLOCKING, Column.MESSAGE]
ADVICE_COLUMNS = [Column.CODE, Column.MESSAGE, Column.TIME_PER_RUN_US, Column.SHARE]
GAIN_COLUMNS = [
    Column.PATH,
    Column.WINNER,
    Column.PREDICTED_SPEEDUP,
    Column.REALISED_SPEEDUP,
    Column.PREDICTED_REGION_SPEEDUP,
    Column.REALISED_REGION_SPEEDUP,
    Column.NOTE,
]
WHOLE_MODEL = "(whole model)"


def _kind(meta_kind: str | None, region_id: str) -> str:
    """``managed`` for AOT/JIT regions (by metadata, else by id prefix), ``untuned`` otherwise."""
    managed = region_kind(meta_kind).managed or parse_region_id(region_id)[0].managed
    return "managed" if managed else "untuned"


def region_summary(doc: ProfileLike, domain: str, keep: Collection[str] = ()) -> pd.DataFrame:
    """Per row of the headline (`aitune.report.headline_rows`), the median over runs of its calls, time and fraction.

    A region missing from a run counts as 0 in that run, so a region seen once is not overstated;
    a looked-through region's self time is a row of its own (``keep``: paths shown whole), and the
    residual comes last.
    """
    kinds = {meta.id: meta.kind for meta in as_profile(doc).regions}
    rows = [
        {
            Column.PATH: row.path,
            Column.REGION_ID: row.label,
            Column.KIND: "residual" if row.region_id is None else _kind(kinds.get(row.region_id), row.region_id),
            Column.CALLS: _median(row.calls),
            Column.TIME_US: _median(row.times_us),
            Column.FRACTION: row.share,
        }
        for row in headline_rows(doc, domain, keep)
    ]
    return pd.DataFrame(rows, columns=REGION_COLUMNS)


def run_timing(doc: ProfileLike) -> pd.DataFrame:
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


PHASE_COLUMNS = [Column.PHASE, Column.ROW, Column.TIME_US, Column.FRACTION, Column.TOKENS]


def phase_table(doc: ProfileLike) -> pd.DataFrame:
    """A generate-like profile's phases, medians per run: a ``(phase)`` row per phase (its share of the run),
    then its regions and residual (their shares of the phase); empty for other profiles."""
    rows = []
    for figure in phase_figures(doc):
        rows.append(
            {
                Column.PHASE: figure.name,
                Column.ROW: "(phase)",
                Column.TIME_US: figure.median_us,
                Column.FRACTION: figure.share,
                Column.TOKENS: figure.steps,
            }
        )
        rows += [
            {
                Column.PHASE: figure.name,
                Column.ROW: row.label,
                Column.TIME_US: _median(row.times_us),
                Column.FRACTION: row.share,
                Column.TOKENS: None,
            }
            for row in phase_rows(doc, figure.name)
        ]
    return pd.DataFrame(rows, columns=PHASE_COLUMNS)


def operator_table(doc: ProfileLike) -> pd.DataFrame:
    """The document's key-averages rows (the CPU-sorted view, or the first view present), ours or AITune's."""
    frame = pd.DataFrame(json_form(operator_rows(doc)))
    return frame if not frame.empty else pd.DataFrame(columns=OPERATOR_COLUMNS)


def memory_table(doc: ProfileLike) -> pd.DataFrame:
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
    Column.REGION_ID, Column.DOMAIN, Column.FLOPS, Column.BYTES, Column.COUNTED_US, Column.UNCOUNTED_US,
    Column.FLOPS_PER_S, Column.BYTES_PER_S, Column.INTENSITY, Column.FRACTION_OF_ROOF, Column.BOUND,
    Column.MOSTLY_UNCOUNTED,
]  # fmt: skip


def efficiency_table(doc: ProfileLike) -> pd.DataFrame:
    """Each region with work: FLOPs, bytes, achieved rates, its place under the roofs (`aitune.report.efficiency`)."""
    return pd.DataFrame([item.to_dict() for item in region_efficiencies(doc)], columns=EFFICIENCY_COLUMNS)


def warning_table(doc: ProfileLike) -> pd.DataFrame:
    """The document's warnings as rows of code, message and source."""
    warnings = as_profile(doc).warnings
    return pd.DataFrame([(w.code, w.message, w.source) for w in warnings], columns=WARNING_COLUMNS)


def rank_table(doc: ProfileLike) -> pd.DataFrame:
    """A merged document's ranks, one row each (`aitune.report.ranks.rank_rows`); empty for a single capture."""
    return pd.DataFrame([vars(row) for row in rank_rows(doc)], columns=RANK_COLUMNS)


def rank_region_table(doc: ProfileLike) -> pd.DataFrame:
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


def run_indices(doc: ProfileLike) -> list[int]:
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
            Column.LANE: region_path(span_region_id(span.name)),
            Column.START_MS: (span.start_us - run.start_us) / 1000,
            Column.END_MS: (span.end_us - run.start_us) / 1000,
            Column.DURATION_MS: span.duration_us / 1000,
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
            Column.UPPER_BOUND_SPEEDUP: _bounded(target.upper_bound_speedup),
            Column.VERDICT: suggestions.verdict(target, picked),
        }
        for target in suggestions.targets
    ]
    return pd.DataFrame(rows, columns=TARGET_COLUMNS)


def _bounded(speedup: float) -> float | None:
    return speedup if speedup < UPPER_BOUND_CAP else None


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
            Column.PATH: gain.path or WHOLE_MODEL,
            Column.REALISED_SPEEDUP: gain.realised_shown[0],
            Column.REALISED_REGION_SPEEDUP: gain.realised_shown[1],
            Column.NOTE: gain.note,
            **({Column.TASK_GATE: report.gate_verdict(gain.path) or MISSING} if gated else {}),
        }
        for gain in report.regions
    ]
    return pd.DataFrame(rows, columns=[*GAIN_COLUMNS, Column.TASK_GATE] if gated else GAIN_COLUMNS)
