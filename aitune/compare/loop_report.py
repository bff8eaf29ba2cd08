"""The folder ``aitune-profile tune`` writes, read back without torch: its layout and its compare report.

``<folder>/before/profile.json`` and ``<folder>/after/profile.json`` (each with its Markdown and
trace) sit beside `REPORT_FILES`. `COMPARE_REPORT` holds `aitune.compare.ProfileDiff.to_dict()`
plus the end-to-end ``speedup``, the ``tuned_regions`` (`aitune.compare.gains.RegionGain.to_dict()`, each with
the ``check`` of the end-to-end verification), the ``verification`` (`aitune.compare.verification.Verification`)
and the ``untuned_slowdowns``; `read_loop_report` checks the parts a reader shows and gives them back
as objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from aitune.compare.gains import RegionGain
from aitune.compare.quality import TaskJudgment
from aitune.compare.verification import RegionCheck
from aitune.errors import ProfileError
from aitune.report.document import ProfileDoc
from aitune.report.io import load, read_json
from aitune.report.samples import DOMAINS
from aitune.report.validate import shortened

BEFORE_FOLDER, AFTER_FOLDER = "before", "after"
COMPARE_REPORT = "compare.json"
REPORT_FILES = ("suggestions.json", "tuning.json", COMPARE_REPORT, "plan.json")
"""The reports beside the two profile folders; none of them is a profile."""

_SPEEDUP_KEYS = ("value", "ci_low", "ci_high")
_TEXT_FIELDS = {"path": False, "winner": False, "reason": True}  # field → may be null


@dataclass(frozen=True)
class LoopReport:
    """What a tune folder's compare report says: the end-to-end speedup (before ÷ after) and each tuned region."""

    domain: str
    speedup: float | None
    ci_low: float | None
    ci_high: float | None
    regions: list[RegionGain]
    task_gate: TaskJudgment | None = None  # the task gate's verdict at a reduced precision; None: none ran

    def gate_verdict(self, path: str) -> str | None:
        """The task gate's verdict on the region at ``path`` (`TaskJudgment.verdict`), None where it judged none."""
        gate = self.task_gate
        return gate.verdict() if gate is not None and path in gate.regions else None


def read_loop_report(raw: Any, name: str) -> LoopReport:
    """The `LoopReport` of a parsed compare report; `ProfileError` naming ``name`` and the field when it is not one."""
    if not isinstance(raw, dict) or not isinstance(raw.get("tuned_regions"), list):
        raise _bad(name, "has no tuned_regions list, so it is not the compare report of `aitune-profile tune`")
    if raw.get("domain") not in DOMAINS:
        raise _bad(name, f"domain {_quoted(raw.get('domain'))} is not one of {', '.join(DOMAINS)}")
    speedup = raw.get("speedup")
    if not isinstance(speedup, dict):
        raise _bad(name, "has no speedup object")
    value, low, high = (_number(speedup.get(key), f"speedup.{key}", name) for key in _SPEEDUP_KEYS)
    regions = [_region(item, f"tuned_regions[{index}]", name) for index, item in enumerate(raw["tuned_regions"])]
    gate = raw.get("task_gate")  # absent or null at fp32 and in reports written before it existed
    judgment = TaskJudgment.from_dict(gate) if gate is not None else None
    if gate is not None and judgment is None:
        raise _bad(name, f"task_gate {_quoted(gate)} is not a task gate verdict (precision, metric, minimum, value)")
    return LoopReport(raw["domain"], value, low, high, regions, judgment)


@dataclass(frozen=True)
class TuneFolder:
    """A tune folder read back: both profiles and its compare report."""

    before: ProfileDoc
    after: ProfileDoc
    report: LoopReport


PROFILE_NAME = "profile.json"


def is_tune_folder(path: Path) -> bool:
    """True when ``path`` is a folder holding a compare report (the rest is checked when it is read)."""
    return path.is_dir() and (path / COMPARE_REPORT).is_file()


def read_tune_folder(folder: Path) -> TuneFolder:
    """Both profiles and the compare report of the folder ``aitune-profile tune`` wrote, each through the one
    bounded reader; `ProfileError` naming the file that is missing or wrong."""
    for part in (f"{BEFORE_FOLDER}/{PROFILE_NAME}", f"{AFTER_FOLDER}/{PROFILE_NAME}", COMPARE_REPORT):
        if not (folder / part).is_file():
            raise ProfileError(
                f"{folder} has no {part}, so it is not a folder `aitune-profile tune` wrote; name one, or two profiles."
            )
    report = folder / COMPARE_REPORT
    return TuneFolder(
        load(folder / BEFORE_FOLDER / PROFILE_NAME),
        load(folder / AFTER_FOLDER / PROFILE_NAME),
        read_loop_report(read_json(report), str(report)),
    )


def _region(item: Any, where: str, name: str) -> RegionGain:
    if not isinstance(item, Mapping):
        raise _bad(name, f"{where} is not an object")
    values: dict[str, Any] = {}
    for field in fields(RegionGain):
        value = item.get(field.name)
        if field.name == "check":
            values["check"] = _check(value, f"{where}.check", name)
        elif field.name in _TEXT_FIELDS:
            if not (isinstance(value, str) or (value is None and _TEXT_FIELDS[field.name])):
                raise _bad(name, f"{where}.{field.name} {_quoted(value)} is not a string")
            values[field.name] = value
        else:
            values[field.name] = _number(value, f"{where}.{field.name}", name)
    return RegionGain(**values)


def _check(value: Any, where: str, name: str) -> RegionCheck | None:
    """The end-to-end verification of a region; absent or null in reports written before it existed."""
    if value is None:
        return None
    check = RegionCheck.from_dict(value)
    if check is None:
        raise _bad(name, f"{where} {_quoted(value)} is not a verification (path, kept, compared, speedup)")
    return check


def _number(value: Any, where: str, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise _bad(name, f"{where} {_quoted(value)} is not a speedup (a number of at least 0, or null)")
    return float(value)


def _quoted(value: Any) -> str:
    return shortened(repr(value))


def _bad(name: str, problem: str) -> ProfileError:
    return ProfileError(f"{name}: {problem}; write the folder again with `aitune-profile tune`.")
