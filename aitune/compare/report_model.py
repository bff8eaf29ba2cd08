"""The compare report's one written definition (``compare.json`` of a tune folder), as `msgspec` Structs.

`aitune.compare.loop_report` writes the report from its records and reads it back by converting the parsed
JSON into `CompareReport`, which checks types, ranges, enums and required fields while it converts and names
the JSON path of the first problem. ``compare.schema.json`` beside this module is generated from these
Structs for outside consumers (`aitune.compare.report_schema`); a test keeps the shipped file in step.

Only what a reader cannot do without is required (``domain``, ``speedup``, ``tuned_regions``): every other
part is optional, as reports written by earlier versions lack the parts added since (an absent optional key is
`UNSET`, or null where the writer writes null). Every Struct tolerates unknown keys, but a verification's
figures, which only aitune measures, refuse them. Every number is at most `MAX_FIGURE` in magnitude, so NaN
and ±Infinity are refused by every bound; every string and list is bounded in length.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import UNSET, Meta, Struct, UnsetType, field

from aitune.compare.end_to_end import CAPTURES, SOURCES
from aitune.compare.task_metrics import METRICS, PRECISIONS
from aitune.compare.verification import COMPARISONS, MAX_CYCLE
from aitune.report.model import (
    MAX_FIGURE,
    MAX_ROWS,
    Count,
    DocumentWarning,
    Domain,
    Figure,
    Label,
    Microseconds,
    Rate,
    Sentence,
    rows,
)

Name = Label
Speedup = Rate
"""Before ÷ after (above 1: faster), or an end of its interval."""
Bytes = Count
Source = Literal[SOURCES]
Precision = Literal[PRECISIONS]
Metric = Literal[tuple(METRICS)]
Comparison = Literal[COMPARISONS]


class Part(Struct, kw_only=True):
    """A part of the report: keyword fields, unknown keys ignored."""


# --- the diff of the two captures (`aitune.compare.diff.ProfileDiff.to_dict`) ---


class Change(Part):
    """One quantity before and after: medians over runs (µs), after ÷ before and its interval; null where a side
    lacks it."""

    before_us: Microseconds | None
    after_us: Microseconds | None
    ratio: Rate | None = None
    ci_low: Rate | None = None
    ci_high: Rate | None = None
    beyond_noise: bool | UnsetType = UNSET


class Runs(Part):
    before: Count
    after: Count


class RegionChange(Part):
    """One region path in either capture, with the ids it had on each side (null on a side without it)."""

    path: Name
    before_id: Name | None
    after_id: Name | None
    change: Change
    status: Literal["both", "added", "removed"] | UnsetType = UNSET


class OperatorChange(Part):
    key: Name
    device_type: Name
    before_us: Microseconds | None
    after_us: Microseconds | None
    delta_us: Figure | UnsetType | None = UNSET


class PhaseRegionChange(Part):
    path: Name
    change: Change


class PhaseChange(Part):
    name: Name
    change: Change
    regions: rows(PhaseRegionChange)


class TokenChange(Part):
    figure: Literal["ttft_us", "per_output_token_us"]
    change: Change


class MemoryChange(Part):
    path: Name
    device: Name
    before_peak_bytes: Bytes | None
    after_peak_bytes: Bytes | None
    before_allocated_bytes: Figure | None
    after_allocated_bytes: Figure | None
    peak_delta_bytes: Annotated[int, Meta(ge=-MAX_FIGURE, le=MAX_FIGURE)] | UnsetType | None = UNSET


# --- what tuning gave: the end-to-end figure, each tuned region, the verification ---


class Interval(Part):
    """A speedup and its interval (null where there is none)."""

    value: Speedup | None = None
    ci_low: Speedup | None = None
    ci_high: Speedup | None = None


class EndToEnd(Interval):
    """The end-to-end speedup a user reads and where it came from; a report written before the source was
    recorded held the captures' figure."""

    source: Source = CAPTURES
    rounds: Count | None = None


class CallSpeedup(Part, forbid_unknown_fields=True):
    """Time without ÷ time with, over paired rounds: the median ratio and its interval; one call's figure holds
    none of its own (``per_call`` empty)."""

    rounds: Count
    median: Speedup
    ci_low: Speedup
    ci_high: Speedup
    per_call: Annotated[list[Any], Meta(max_length=0)] = field(default_factory=list)


class PairedSpeedup(CallSpeedup):
    """A paired figure, with the same figure for each call of a cycle of differing calls (``per_call``)."""

    per_call: Annotated[list[CallSpeedup], Meta(max_length=MAX_CYCLE)] = field(default_factory=list)


class RegionCheck(Part):
    """One region's verdict in the end-to-end verification: kept or put back, on which comparison."""

    path: Name
    kept: bool
    compared: Comparison
    speedup: PairedSpeedup


class TunedRegion(Part):
    """One region the loop tried to tune (`aitune.compare.gains.RegionGain`): the backend that won (or eager), why
    not, the predicted and realised speedups (null where there is none), and its verification's verdict."""

    path: Name
    winner: Name
    reason: Sentence | None = None
    predicted_speedup: Speedup | None = None
    realised_speedup: Speedup | None = None
    predicted_region_speedup: Speedup | None = None
    realised_region_speedup: Speedup | None = None
    check: RegionCheck | None = None
    captured_speedup: Speedup | None = None
    tuned: bool | UnsetType = UNSET
    prediction_error: Rate | UnsetType | None = UNSET


class WholeModel(Part):
    predicted_speedup: Speedup | None
    separate_predicted_speedup: Speedup | None
    separate_paths: rows(Name)
    chosen: bool
    reason: Sentence


class Verification(Part):
    """Every region's check, in the order verified, and the kept set against eager (null when none was kept)."""

    regions: rows(RegionCheck)
    end_to_end: PairedSpeedup | None


class Slowdown(Part):
    """A region left as it was that ran slower after tuning, beyond noise: after ÷ before and its interval."""

    path: Name
    factor: Rate
    ci_low: Rate
    ci_high: Rate


class TaskGate(Part):
    """The task gate's verdict on the reduced-precision regions: the metric, its bar and the measured figure."""

    precision: Precision
    metric: Metric
    minimum: Figure
    value: Figure | None
    regions: rows(Name)
    inputs: Annotated[int, Meta(ge=1, le=MAX_FIGURE)] = 1
    first_divergence: Count | None = None
    problem: Sentence | None = None
    passed: bool | UnsetType = UNSET


class RankFigures(Part):
    """A median run before and after tuning (µs) and the speedup (null when after is 0)."""

    before_us: Microseconds
    after_us: Microseconds
    speedup: Speedup | None = None


class Rank(RankFigures, kw_only=True):
    rank: Count


class Ranks(Part):
    """Under torchrun: each rank's and the job's figures (`aitune.compare.ranks.rank_figures`), the slowest rank
    after tuning, and the stragglers the capture before tuning named."""

    world_size: Count
    ranks: Annotated[list[Rank], Meta(min_length=1, max_length=MAX_ROWS)]
    job: RankFigures
    slowest_rank: Count
    stragglers: rows(Sentence) = field(default_factory=list)


class CompareReport(Part):
    """The compare report of a tune folder: the diff of the captures before and after tuning, the end-to-end
    speedup a user reads, and per tuned region the predicted and realised gain. Readers ignore unknown keys."""

    domain: Domain
    speedup: EndToEnd
    tuned_regions: rows(TunedRegion)
    captures_speedup: Interval | UnsetType = UNSET
    scenario: Name | UnsetType | None = UNSET
    runs: Runs | UnsetType = UNSET
    run_time: Change | UnsetType = UNSET
    residual: Change | UnsetType = UNSET
    regions: rows(RegionChange) | UnsetType = UNSET
    headline: rows(RegionChange) | UnsetType = UNSET
    operators: rows(OperatorChange) | UnsetType = UNSET
    warnings_only_before: rows(DocumentWarning) | UnsetType = UNSET
    warnings_only_after: rows(DocumentWarning) | UnsetType = UNSET
    world_sizes: Annotated[list[Count | None], Meta(min_length=2, max_length=2)] | UnsetType = UNSET
    phases: rows(PhaseChange) | UnsetType = UNSET
    tokens: rows(TokenChange) | UnsetType = UNSET
    memory: rows(MemoryChange) | UnsetType = UNSET
    memory_notes: Annotated[list[Sentence | None], Meta(min_length=2, max_length=2)] | UnsetType = UNSET
    added: rows(Name) | UnsetType = UNSET
    removed: rows(Name) | UnsetType = UNSET
    whole_model: WholeModel | UnsetType | None = UNSET
    verification: Verification | UnsetType | None = UNSET
    untuned_slowdowns: rows(Slowdown) | UnsetType = UNSET
    precision: Precision | UnsetType = UNSET
    task_gate: TaskGate | UnsetType | None = UNSET
    ranks: Ranks | UnsetType | None = UNSET
