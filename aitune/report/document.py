"""The profile document's JSON form (`ProfileDoc`), the readers every later stage calls on it, and its scenarios.

`aitune.report.builder` derives a document from a trace; this module needs no trace analysis (nor
numpy), so the commands that only read a document never import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from aitune.report.memo import derived
from aitune.report.model import UNSET, Profile, ProfileLike, Record, Section, UnsetType, as_profile, given

FULL_MODE = "full"
LITE_MODE = "lite"
"""``profiler.mode``: a full capture traces operators; a lite one times runs and regions only, so its
document has no operator table (``profiler.key_averages``), residual causes or operator mixes."""

LITE_LACKS = (
    "runs and regions timed by a clock, without the profiler: no operator table, residual causes, operator mixes "
    "or memory"
)
"""What a lite document lacks, in the words every reader shows."""


class _Mode(Record):
    mode: str | UnsetType = UNSET


class _Profiled(Record):
    """What `is_lite` reads of a dict: a document's, or a capture's metadata, which is no document."""

    profiler: _Mode | UnsetType = UNSET


def is_lite(doc: Profile | Mapping[str, Any]) -> bool:
    """Whether ``doc`` (a document, or a capture's metadata) comes from a lite capture."""
    profiler = doc.profiler if isinstance(doc, Profile) else msgspec.convert(doc, _Profiled).profiler
    return profiler is not UNSET and profiler.mode == LITE_MODE


def operator_runs_note(doc: ProfileLike) -> str | None:
    """How a full capture that traced operators in runs of their own got its numbers, in the words
    every reader shows; None for any other document."""
    count = len(given(as_profile(doc).operator_runs, []))
    if not count:
        return None
    return f"operators traced in {count} run(s) of their own, after the measured runs (timed by a clock)"


def calls_note(doc: ProfileLike) -> str | None:
    """Every call the capture made and what it was for, in the words every reader shows; None for a
    document without a warmup section (an analysed foreign trace, or no warmups asked for)."""
    record = as_profile(doc)
    warmup = record.warmup
    if warmup is UNSET:
        return None
    set_aside = given(warmup.set_aside, 0)
    parts = [f"{warmup.performed - set_aside} plain warmup(s)"]
    if set_aside:
        parts.append(f"{set_aside} run(s) set aside as warmups (the run time was still falling)")
    parts.append(f"{len(record.runs)} measured run(s)")
    if set_aside:
        plain = 0 if record.capture_overhead is UNSET else record.capture_overhead.plain_samples
        parts.append(f"{plain} plain call(s) for the overhead's baseline")
    if count := len(given(record.operator_runs, [])):
        which = (
            "1 operator run (the operator table; it"
            if count == 1
            else f"{count} operator runs (the operator table; the first"
        )
        parts.append(f"{which} records the input shapes)")
    elif is_lite(record):
        parts.append("1 instrumented warmup (it records the input shapes)")
    elif record.profiler.mode == FULL_MODE:
        parts.append("1 memory run and the profiler's warmup")
    return " + ".join(parts)


ProfileDoc = dict[str, Any]
"""A profile document as JSON data: what the builder writes and a file holds. Its one definition is
`aitune.report.model.Profile`: `aitune.report.io.load` gives a file's as that record, a reader takes either
(`aitune.report.model.ProfileLike`) through `as_profile`, and `json_form` turns a record back into this."""


SCENARIO_KEYS = Section.__struct_fields__
"""The keys of a document that differ from one scenario to another."""


def combine_scenarios(names: list[str], docs: list[ProfileDoc]) -> ProfileDoc:
    """One document for several scenarios: ``scenarios`` holds each one's section; the first is also top-level.

    Readers that know one input only (AITune's) see the first scenario, as if it had been profiled alone.
    """
    assert names and len(names) == len(docs), "one name per scenario document"
    sections = [
        {"name": name, **{key: doc[key] for key in SCENARIO_KEYS if key in doc}}  # type: ignore[literal-required]
        for name, doc in zip(names, docs, strict=True)
    ]
    return {**docs[0], "scenarios": sections}  # type: ignore[return-value]


def scenario_names(doc: ProfileLike) -> list[str]:
    """The scenario names of a document; [] when it profiled one input."""
    return [scenario.name for scenario in given(as_profile(doc).scenarios, [])]


def select_scenario(doc: ProfileLike, name: str | None) -> ProfileLike:
    """The document as if only scenario ``name`` had been profiled, as the typed record: the scenario's section in
    place of the top level's, and no scenarios (None: ``doc`` as it is).

    Raises `KeyError` naming the scenarios there are when ``name`` is not one of them.
    """
    if name is None:
        return doc
    # one view per scenario within `computed_once`, so the views derived from it are found once too
    return derived(doc, ("scenario", name), lambda: _scenario_view(as_profile(doc), name))


def _scenario_view(record: Profile, name: str) -> Profile:
    for scenario in given(record.scenarios, []):
        if scenario.name == name:
            section = {field: getattr(scenario, field) for field in SCENARIO_KEYS}
            return msgspec.structs.replace(record, **section, scenarios=UNSET)
    raise KeyError(f"no scenario {name!r} in this profile; it has {scenario_names(record) or 'none'}")
