"""The folder ``aitune-profile tune`` writes, read back without torch: its layout and its compare report.

``<folder>/before/profile.json`` and ``<folder>/after/profile.json`` (each with its Markdown and
trace) sit beside `REPORT_FILES`. `COMPARE_REPORT` holds `aitune.compare.ProfileDiff.to_dict()`
plus the end-to-end ``speedup`` a user reads (`aitune.compare.end_to_end`: the verified figure, with its
``source``), the two captures' ``captures_speedup``, the ``tuned_regions``
(`aitune.compare.gains.RegionGain.to_dict()`, each with the ``check`` of the end-to-end verification), the
``verification`` (`aitune.compare.verification.Verification`) and the ``untuned_slowdowns``.
`compare_report` is its one writer, `read_compare_report` its one reader (through the bounded door of
`aitune.report.io`), and `read_loop_report` checks the parts a reader shows and gives them back as objects.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from aitune.compare.diff import ProfileDiff
from aitune.compare.end_to_end import EndToEnd, end_to_end, read_end_to_end
from aitune.compare.gains import RegionGain, Slowdown, WholeModel, speedup
from aitune.compare.quality import TaskJudgment
from aitune.compare.ranks import read_rank_figures
from aitune.compare.verification import RegionCheck, Verification
from aitune.errors import ProfileError
from aitune.report.document import ProfileDoc
from aitune.report.io import load, read_json
from aitune.report.samples import DOMAINS
from aitune.report.validate import shortened

BEFORE_FOLDER, AFTER_FOLDER = "before", "after"
COMPARE_REPORT = "compare.json"
REPORT_FILES = ("suggestions.json", "tuning.json", COMPARE_REPORT, "plan.json")
"""The reports beside the two profile folders; none of them is a profile."""

_SPEEDUP_KEYS = ("value", "ci_low", "ci_high")  # the captures' speedup
_TEXT_FIELDS = {"path": False, "winner": False, "reason": True}  # field → may be null


@dataclass(frozen=True)
class LoopReport:
    """What a tune folder's compare report says: the end-to-end speedup (before ÷ after) a user reads, the two
    captures' speedup beside it, and each tuned region."""

    domain: str
    end_to_end: EndToEnd
    captures: tuple[float | None, float | None, float | None]  # the captures' speedup and interval
    regions: list[RegionGain]
    task_gate: TaskJudgment | None = None  # the task gate's verdict at a reduced precision; None: none ran
    ranks: dict[str, Any] | None = None  # under torchrun: each rank's and the job's figures (`rank_figures`)

    def gate_verdict(self, path: str) -> str | None:
        """The task gate's verdict on the region at ``path`` (`TaskJudgment.verdict`), None where it judged none."""
        gate = self.task_gate
        return gate.verdict() if gate is not None and path in gate.regions else None


def compare_report(
    diff: ProfileDiff,
    gains: Sequence[RegionGain],
    *,
    whole_model: WholeModel | None = None,
    verification: Verification | None = None,
    slowdowns: Sequence[Slowdown] = (),
    precision: str = "fp32",
    task_gate: TaskJudgment | None = None,
    ranks: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The compare report (`COMPARE_REPORT`): the diff, the end-to-end speedup (before ÷ after) and the gain
    per tuned region, with the whole model's weighing, the verification and the task gate where they ran, and
    under torchrun each rank's and the job's figures (``ranks``, `aitune.compare.ranks.rank_figures`)."""
    value, low, high = speedup(diff.run_time)
    return {
        **diff.to_dict(),
        "speedup": end_to_end(diff, gains, verification).to_dict(),
        "captures_speedup": {"value": value, "ci_low": low, "ci_high": high},
        "tuned_regions": [gain.to_dict() for gain in gains],
        "whole_model": asdict(whole_model) if whole_model is not None else None,
        "verification": verification.to_dict() if verification is not None else None,
        "untuned_slowdowns": [asdict(slowdown) for slowdown in slowdowns],
        "precision": precision,
        "task_gate": task_gate.to_dict() if task_gate is not None else None,
        **({"ranks": dict(ranks)} if ranks is not None else {}),
    }


def read_compare_report(path: Path, name: str, read: Callable[[Path, str], Any] | None = None) -> LoopReport:
    """The `LoopReport` of the compare report at ``path``, parsed by ``read`` (path, name → JSON; default: the
    command line's bounded reader, `aitune.report.io.read_json`); `ProfileError` naming ``name``."""
    raw = read(path, name) if read is not None else read_json(path)
    return read_loop_report(raw, name)


def read_loop_report(raw: Any, name: str) -> LoopReport:
    """The `LoopReport` of a parsed compare report; `ProfileError` naming ``name`` and the field when it is not one."""
    if not isinstance(raw, dict) or not isinstance(raw.get("tuned_regions"), list):
        raise _bad(name, "has no tuned_regions list, so it is not the compare report of `aitune-profile tune`")
    if raw.get("domain") not in DOMAINS:
        raise _bad(name, f"domain {_quoted(raw.get('domain'))} is not one of {', '.join(DOMAINS)}")
    figure = read_end_to_end(raw.get("speedup"))
    if figure is None:
        raise _bad(name, f"speedup {_quoted(raw.get('speedup'))} is not an end-to-end figure (value, ci_low, ci_high)")
    # A report written before the captures had their own key held their figure as the speedup.
    captured = raw.get("captures_speedup", raw["speedup"])
    if not isinstance(captured, dict):
        raise _bad(name, "has no captures_speedup object")
    value, low, high = (_number(captured.get(key), f"captures_speedup.{key}", name) for key in _SPEEDUP_KEYS)
    regions = [_region(item, f"tuned_regions[{index}]", name) for index, item in enumerate(raw["tuned_regions"])]
    gate = raw.get("task_gate")  # absent or null at fp32 and in reports written before it existed
    judgment = TaskJudgment.from_dict(gate) if gate is not None else None
    if gate is not None and judgment is None:
        raise _bad(name, f"task_gate {_quoted(gate)} is not a task gate verdict (precision, metric, minimum, value)")
    try:
        ranks = read_rank_figures(raw["ranks"]) if raw.get("ranks") is not None else None
    except ValueError as problem:
        raise _bad(name, str(problem)) from None
    return LoopReport(raw["domain"], figure, (value, low, high), regions, judgment, ranks)


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
    before, after, report = tune_folder_files(folder)
    for path in (before, after, report):
        if not path.is_file():
            raise ProfileError(
                f"{folder} has no {path.relative_to(folder).as_posix()}, so it is not a folder `aitune-profile tune` "
                "wrote; name one, or two profiles."
            )
    return TuneFolder(load(before), load(after), read_compare_report(report, str(report)))


def tune_folder_files(folder: Path) -> tuple[Path, Path, Path]:
    """The files `read_tune_folder` reads: the before and after profiles and the compare report."""
    return folder / BEFORE_FOLDER / PROFILE_NAME, folder / AFTER_FOLDER / PROFILE_NAME, folder / COMPARE_REPORT


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
