"""The folder ``aitune-profile tune`` writes, read back without torch: its layout and its compare report.

``<folder>/before/profile.json`` and ``<folder>/after/profile.json`` (each with its Markdown and
trace) sit beside `REPORT_FILES`. `COMPARE_REPORT` holds `aitune.compare.ProfileDiff.to_dict()`
plus the end-to-end ``speedup`` a user reads (`aitune.compare.end_to_end`: the verified figure, with its
``source``), the two captures' ``captures_speedup``, the ``tuned_regions``
(`aitune.compare.gains.RegionGain.to_dict()`, each with the ``check`` of the end-to-end verification), the
``verification`` (`aitune.compare.verification.Verification`) and the ``untuned_slowdowns``.
`compare_report` is its one writer, `read_compare_report` its one reader (through the bounded door of
`aitune.report.io`), and `read_loop_report` converts what was read into `aitune.compare.report_model`'s
`CompareReport` (the one definition: a problem is refused naming its JSON path) and gives the parts a reader
shows back as objects.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import msgspec
from msgspec import UNSET

from aitune.compare import report_model
from aitune.compare.diff import ProfileDiff
from aitune.compare.end_to_end import NOTHING_TUNED, EndToEnd, end_to_end
from aitune.compare.gains import RegionGain, Slowdown, WholeModel, speedup
from aitune.compare.quality import TaskJudgment
from aitune.compare.verification import PairedSpeedup, RegionCheck, Verification
from aitune.errors import ProfileError
from aitune.report.io import load, read_json
from aitune.report.model import Profile, json_form
from aitune.report.problems import first_problem

BEFORE_FOLDER, AFTER_FOLDER = "before", "after"
COMPARE_REPORT = "compare.json"
REPORT_FILES = ("suggestions.json", "tuning.json", COMPARE_REPORT, "plan.json")
"""The reports beside the two profile folders; none of them is a profile."""


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
    """The `LoopReport` of a parsed compare report, converted into `report_model.CompareReport`; `ProfileError`
    naming ``name`` and the JSON path of the first problem when it is not one."""
    report = _typed(raw, name)
    # A report written before the captures had their own key held their figure as the speedup.
    captured = report.speedup if report.captures_speedup is UNSET else report.captures_speedup
    gate = report.task_gate  # absent or null at fp32 and in older reports
    return LoopReport(
        report.domain,
        _end_to_end(report.speedup),
        (captured.value, captured.ci_low, captured.ci_high),
        [_gain(region) for region in report.tuned_regions],
        TaskJudgment.from_record(gate) if gate else None,
        json_form(report.ranks) if report.ranks else None,
    )


@dataclass(frozen=True)
class TuneFolder:
    """A tune folder read back: both profiles (typed records) and its compare report."""

    before: Profile
    after: Profile
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


def _typed(raw: Any, name: str) -> report_model.CompareReport:
    """``raw`` as a `report_model.CompareReport`; `ProfileError` with the first problem in path order."""
    if not _holds_tuned_regions(raw):
        raise _bad(name, "has no tuned_regions list, so it is not the compare report of `aitune-profile tune`")
    try:
        return msgspec.convert(raw, report_model.CompareReport)
    except msgspec.ValidationError:
        raise _bad(name, first_problem(raw, report_model.CompareReport)) from None


def _holds_tuned_regions(raw: Any) -> bool:
    """Whether the parsed JSON ``raw`` is taken for a compare report at all, however wrong the rest."""
    return isinstance(raw, dict) and "tuned_regions" in raw


def _end_to_end(figure: report_model.EndToEnd) -> EndToEnd:
    if figure.source == NOTHING_TUNED or figure.value is None:
        return EndToEnd(NOTHING_TUNED)
    return EndToEnd(figure.source, figure.value, figure.ci_low, figure.ci_high, figure.rounds)


def _gain(region: report_model.TunedRegion) -> RegionGain:
    """The record of a tuned region: the model's fields of the same names, its check as a `RegionCheck`."""
    values = {field.name: getattr(region, field.name) for field in fields(RegionGain)}
    return RegionGain(**{**values, "check": _check(region.check) if region.check is not None else None})


def _check(check: report_model.RegionCheck) -> RegionCheck:
    return RegionCheck(check.path, check.kept, check.compared, _paired(check.speedup))


def _paired(figure: report_model.PairedSpeedup) -> PairedSpeedup:
    calls = tuple(PairedSpeedup(call.rounds, call.median, call.ci_low, call.ci_high) for call in figure.per_call)
    return PairedSpeedup(figure.rounds, figure.median, figure.ci_low, figure.ci_high, calls)


def _bad(name: str, problem: str) -> ProfileError:
    return ProfileError(f"{name}: {problem}; write the folder again with `aitune-profile tune`.")
