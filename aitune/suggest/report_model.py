"""The suggestions' one written definition (``suggestions.json`` of a tune folder, ``suggest --json``), as
`msgspec` Structs.

`aitune.suggest.Suggestions.to_dict` writes it; `aitune.suggest.forecast.read_forecasts` reads it back by
converting the parsed JSON into `SuggestionsReport`, which checks types, ranges, enums and required fields while
it converts and names the JSON path of the first problem. ``suggestions.schema.json`` beside this module is
generated from these Structs for outside consumers (`aitune.suggest.report_schema`); a test keeps the shipped
file in step.

Every key the writer always writes is required; the keys it writes only where they apply (``precision``,
``ledger_correction``) and a target's keys added since the first tune folders (``fraction_of_roof``,
``outside_root``, ``inductor_region_speedup``) are optional, `UNSET` when absent. Every Struct tolerates
unknown keys. Every number is at most ``MAX_FIGURE`` (`aitune.report.model`) in magnitude, so NaN and
±Infinity are refused by every bound; every string and list is bounded in length.
"""

from __future__ import annotations

from typing import Literal

from msgspec import UNSET, Struct, UnsetType

from aitune.report.model import (
    Code,
    Count,
    Domain,
    Fraction,
    GainCalibration,
    Label,
    Microseconds,
    Rate,
    Sentence,
    rows,
)
from aitune.suggest.precision import ARITHMETIC_FACTORS

SCHEMA_VERSION = 1
"""The version of suggestions.json this aitune writes and reads."""
KIND = "aitune-suggestions"

Speedup = Rate
"""Before ÷ after (above 1: faster)."""


class Part(Struct, kw_only=True):
    """A part of the suggestions: keyword fields, unknown keys ignored."""


class Reason(Part):
    """Why a target is or is not recommended: a stable code, one sentence, and whether it keeps the target from
    being recommended."""

    code: Code
    message: Sentence
    blocking: bool


class Target(Part):
    """One region ``aitune.torch.wrap`` can take (`aitune.suggest.Target`): its share of the run (a median over
    runs, with its range), its times and calls, and the speedups predicted for it, end to end and of its own."""

    path: Label
    region_id: Label
    module_type: Label | None
    share: Fraction
    share_low: Fraction
    share_high: Fraction
    time_per_run_us: Microseconds
    calls_per_run: Rate
    time_per_call_us: Microseconds
    upper_bound_speedup: Speedup
    predicted_region_speedup: Speedup
    predicted_speedup: Speedup
    recommended: bool
    reasons: rows(Reason)
    inside: rows(Label)
    fraction_of_roof: Rate | UnsetType | None = UNSET
    outside_root: bool | UnsetType = UNSET
    inductor_region_speedup: Speedup | UnsetType | None = UNSET


class Advice(Part):
    """Something to do beyond tuning a module, with the time (µs) and share of a median run it concerns (for
    ``FIRST_CALL``: the first call's extra time and its fraction of that call)."""

    code: Code
    message: Sentence
    time_per_run_us: Microseconds
    share: Fraction


class PrecisionOutlook(Part):
    """One target at a reduced precision: its predicted own speedup (1 where refused), why this machine would not
    run it fast, and why the task gate would likely refuse it (null where neither applies)."""

    path: Label
    precision: Literal[tuple(ARITHMETIC_FACTORS)]
    predicted_region_speedup: Speedup
    refused: Sentence | None
    risk: Sentence | None


class LedgerCorrection(Part):
    """The bias the predictions were divided by (predicted ÷ verified end-to-end speedup, a geometric mean) and how
    many verified tunings of this machine's ledger it came from."""

    bias: Rate
    count: Count


class SuggestionsReport(Part):
    """Suggestions for one profile: every target ranked (recommended first), the advice beyond modules, the
    recommended paths with their combined speedups, and the gain model's figures they were predicted with.
    Readers ignore unknown keys."""

    schema_version: Literal[SCHEMA_VERSION]
    kind: Literal[KIND]
    domain: Domain
    scenario: Label | None
    run_time_us: Microseconds
    targets: rows(Target)
    advice: rows(Advice)
    recommended: rows(Label)
    recommended_predicted_speedup: Speedup
    recommended_upper_bound_speedup: Speedup
    gain_calibration: GainCalibration
    precision: rows(PrecisionOutlook) | UnsetType = UNSET
    ledger_correction: LedgerCorrection | UnsetType = UNSET
