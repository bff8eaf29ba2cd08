"""What ``aitune-profile tune`` runs and writes: the loop on an entry function, its outputs in one folder.

The folder: ``before/`` and ``after/`` (profile.json, profile.md, trace.json.gz), ``suggestions.json``,
``tuning.json``, ``compare.json`` and ``plan.json`` (only the regions the end-to-end verification kept).
Under torchrun each rank writes its files into ``rank<r>/`` of the folder, except the plan: the job has
one, the same on every rank. Rank 0 alone writes the job's folder, the folder itself: the ranks' merged
captures as ``before/`` and ``after/`` (what `merge` writes), the reports and the plan.
torch is imported inside the functions, so the other commands never load it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import UNSET
from rich.console import Console, Group
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from aitune.cli.outputs import TRACE_NAME, Written, output_folder, profile_files, rank_folder, write_profile
from aitune.compare.end_to_end import captures_line
from aitune.compare.gains import slowdown_line, speedup
from aitune.compare.loop_report import AFTER_FOLDER, BEFORE_FOLDER, REPORT_FILES
from aitune.compare.ranks import rank_lines
from aitune.profiler_lines import without_profiler_lines
from aitune.report import dumps
from aitune.report.formatting import factor, ms
from aitune.report.io import write_atomic
from aitune.report.model import given
from aitune.report.safe_text import terminal_text
from aitune.torch.tuning.report_model import TuningReport

if TYPE_CHECKING:
    from aitune.torch import LoopConfig, LoopResult


@dataclass(frozen=True)
class LoopFiles:
    """Where one loop's outputs went."""

    folder: Path
    before: Written
    after: Written
    reports: dict[str, Path]

    def listing(self) -> str:
        """The paths, one per line, for the terminal."""
        lines = [f"{'before:':<13}{self.before.profile}", f"{'after:':<13}{self.after.profile}"]
        lines += [f"{name.removesuffix('.json') + ':':<13}{path}" for name, path in self.reports.items()]
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "output": str(self.folder),
            "before": self.before.as_dict(),
            "after": self.after.as_dict(),
            **{name.removesuffix(".json"): str(path) for name, path in self.reports.items()},
        }


def tune_entry_into(
    folder: Path,
    source: str,
    function: str,
    *,
    obj: str | None,
    input_name: str | None,
    config: LoopConfig,
    eval_inputs_name: str | None = None,
    plan: Path | Mapping[str, Any] | None,
    keep_traces: bool,
) -> tuple[LoopResult, LoopFiles]:
    """Run the loop on ``source:function`` with a progress bar per phase and write its outputs into ``folder``."""
    from aitune.torch import optimize
    from aitune.torch.performance.entry import loaded_entry

    job_folder, folder = folder, rank_folder(folder)
    plan_folder = job_folder if folder == job_folder or folder.name == "rank0" else None
    traces = (folder / BEFORE_FOLDER / TRACE_NAME, folder / AFTER_FOLDER / TRACE_NAME) if keep_traces else None
    with output_folder(folder, exclusive=True):
        with without_profiler_lines() as stderr, PhaseBars(stderr) as on_phase:
            for side in (BEFORE_FOLDER, AFTER_FOLDER):
                (folder / side).mkdir(exist_ok=True)
            with loaded_entry(
                source, function, obj=obj, input_name=input_name, eval_inputs_name=eval_inputs_name
            ) as entry:
                result = optimize(
                    entry.root,
                    entry.input_data,
                    entry.function,
                    config=config,
                    plan=plan,
                    eval_inputs=entry.eval_inputs,
                    trace_files=traces,
                    on_phase=on_phase,
                    obj_name=entry.root_name,
                )
        files = write_loop(folder, result, traces, None if result.job_sides else plan_folder)
        if result.job_sides is not None and plan_folder is not None:  # rank 0 lists the job's files
            files = write_loop(plan_folder, _the_job_s(result), None, plan_folder)
        return result, files


def _the_job_s(result: LoopResult) -> LoopResult:
    """``result`` with the ranks' merged captures as its sides (their traces stay in the rank folders)."""
    before, after = ({k: v for k, v in doc.items() if k != "trace_file"} for doc in result.job_sides)
    return replace(result, before=before, after=after)


def loop_files(folder: Path) -> list[Path]:
    """Every file `write_loop` (and the captures' traces) may write in ``folder``."""
    sides = [folder / side for side in (BEFORE_FOLDER, AFTER_FOLDER)]
    return [*(folder / name for name in REPORT_FILES), *(path for side in sides for path in profile_files(side))] + [
        side / TRACE_NAME for side in sides
    ]


def write_loop(
    folder: Path, result: LoopResult, traces: tuple[Path, Path] | None, plan_folder: Path | None
) -> LoopFiles:
    """Both profiles and the reports of ``result`` into ``folder``, the plan into ``plan_folder`` (None: not
    written, as on a rank other than 0 under torchrun)."""
    before = write_profile(folder / BEFORE_FOLDER, result.before, trace=traces[0] if traces else None)
    after = write_profile(folder / AFTER_FOLDER, result.after, trace=traces[1] if traces else None)
    contents = {
        "suggestions.json": result.suggestions.to_dict() if result.suggestions is not None else None,
        "tuning.json": result.tuning,
        "compare.json": result.comparison(),
        "plan.json": result.plan,
    }
    places = {name: folder for name in REPORT_FILES} | {"plan.json": plan_folder}
    reports = {}
    for name in REPORT_FILES:
        if contents[name] is not None and places[name] is not None:
            reports[name] = write_atomic(places[name] / name, dumps(contents[name]))
    return LoopFiles(folder, before, after, reports)


class PhaseBars:
    """A rich progress display with one bar per loop phase; on a pipe or log, nothing is drawn."""

    def __init__(self, stream: Any) -> None:
        self._progress = Progress(
            TextColumn("{task.description:<16}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(file=stream),
            disable=not stream.isatty(),
        )
        self._current: TaskID | None = None

    def __enter__(self) -> PhaseBars:
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._finish()
        self._progress.__exit__(*exc)

    def __call__(self, name: str, calls: int | None) -> Any:
        self._finish()
        task = self._progress.add_task(name, total=calls)
        self._current = task
        return lambda: self._progress.advance(task)

    def _finish(self) -> None:
        if self._current is not None:
            task = self._progress.tasks[self._current]
            self._progress.update(self._current, total=task.completed or 1, completed=task.completed or 1)


def loop_view(result: LoopResult) -> Group:
    """Per tuned region the backend, the predicted and the realised gain; then the end-to-end speedup."""
    table = Table(
        title="Tuned regions (speedup = before ÷ after, end to end)",
        caption="realised: verified in alternating eager/tuned rounds (its contribution, or the run when it is "
        "alone); own speedup: the region's own time in the two captures",
    )
    for header in ("Region", "Backend", "Predicted", "Realised", "Own speedup", "Note"):
        table.add_column(header, justify="left" if header in ("Region", "Backend", "Note") else "right")
    for gain in result.gains:
        table.add_row(
            terminal_text(gain.path or "(whole model)"),
            terminal_text(gain.winner),
            factor(gain.predicted_speedup),
            *(factor(value) for value in gain.realised_shown),  # an untouched region's change is noise
            terminal_text(gain.note),
        )
    lines = [*verification_lines(result), *end_to_end_lines(result), *rank_lines(result.ranks)]
    lines += [*precision_lines(result), *recipe_lines(result)]
    if result.whole_model is not None:
        verdict = "tuned first" if result.whole_model.chosen else "not tuned"
        lines.insert(0, f"whole model {verdict}: {result.whole_model.reason}")
    slowed = slowdown_line(result.slowdowns)
    if slowed is not None:
        lines.append(slowed)
    return Group(table, *map(terminal_text, lines))


def recipe_lines(result: LoopResult) -> list[str]:
    """Where the decoder recipe stayed tuned, what it changed in the workload: ``generate`` uses a static cache."""
    settings = result.generation
    if not settings or not result.tuned:
        return []
    from aitune.torch.decoder_recipe import RECIPE  # a loop result exists: torch is loaded

    shown = ", ".join(f"{key}={value!r}" for key, value in settings.items())
    report = _tuning_report(result)
    cost = None if report is None else given(report.generation_cost, None)
    timed = f" (eager, it took {factor(cost)} the time; the forecast counts that)" if cost is not None else ""
    return [
        f"decoder recipe kept ({RECIPE}): generate now runs with generation_config.{shown}{timed}; "
        "applying the plan sets it again"
    ]


def verification_lines(result: LoopResult) -> list[str]:
    """One line per region the end-to-end verification put back.

    ``encoder: onnxruntime put back: end to end 0.73× [0.63, 0.92] over 12 rounds``
    """
    return [gain.check.line(gain.winner) for gain in result.gains if gain.check is not None and not gain.check.kept]


def precision_lines(result: LoopResult) -> list[str]:
    """At a reduced precision: the level each region ended at and why, the task gate's verdict with its figure,
    and the weight bytes it saves.

    ``precision body: fp32, int8_dynamic slower than inductor (1.10× vs 2.05× over eager; …); kept inductor``
    ``task gate (int8): top1_agreement 0.8750 >= 0.99: refused, the regions run in fp32``
    """
    lines = [f"precision {choice.line()}" for choice in result.precision_choices]
    lines += [result.task_gate.line()] if result.task_gate is not None else []
    report = _tuning_report(result)
    memory = UNSET if report is None else report.weight_memory
    if memory is not UNSET and memory.regions:
        weights = f"{_mb(memory.original_bytes)} → {_mb(memory.tuned_bytes)} MB"
        lines.append(f"weights of the tuned regions: {weights} ({result.precision})")
    return lines


def _tuning_report(result: LoopResult) -> TuningReport | None:
    """The loop's tuning report (tuning.json) as its model reads it; None when a plan was applied."""
    return None if result.tuning is None else msgspec.convert(result.tuning, TuningReport)


def _mb(size: int) -> str:
    return f"{size / 2**20:.2f}"


def end_to_end_lines(result: LoopResult) -> list[str]:
    """The figure a user reads, then the captures' figure labelled as theirs, and a line when the two disagree.

    ``end to end: 1.60× [1.55, 1.69] faster, verified over 12 alternating eager/tuned rounds in one process``
    ``the captures: 54.139 → 38.342 ms median run (cpu), 1.41× [1.38, 1.45]``
    """
    change = result.diff.run_time
    if change.before_us is None or change.after_us is None:
        return [f"end to end: {result.end_to_end.shown()}", "the captures: no measured runs to compare"]
    captured = speedup(change)
    lines = [
        f"end to end: {result.end_to_end.shown()}",
        f"the captures: {ms(change.before_us)} → {ms(change.after_us)} ms median run ({result.diff.domain}), "
        f"{factor(*captured)}",
    ]
    verified = result.verification.end_to_end if result.verification is not None else None
    per_call = verified.per_call_shown() if verified is not None and result.tuned else None
    if per_call is not None:
        lines.append(f"per call of the cycle: {per_call}")
    differ = captures_line(result.end_to_end, captured)
    return lines if differ is None else [*lines, differ]
