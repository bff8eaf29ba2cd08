"""``tune``: its flags checked and turned into a `LoopConfig`, the loop run on an entry function, its folder
written and said (`aitune.cli.loop`)."""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from aitune.cli.console import console
from aitune.cli.edge import fail
from aitune.cli.history import keep_in_history
from aitune.cli.options import check_positive, check_run_counts, parse_tolerance, require_torch, words

if TYPE_CHECKING:
    from aitune.torch import LoopConfig
    from aitune.torch.tuning.budget import TimeBudget

RESERVE_AFTER_TUNING = 2.0
"""--time-budget keeps back this many times the time spent before tuning: the after capture, then verification."""


@dataclass(frozen=True)
class TuneFlags:
    """``tune``'s flags as given on the command line, before they are checked."""

    top: int
    targets: str | None
    mode: str
    strategy: str
    backends: str | None
    tolerance: str | None
    time_budget: float | None
    plan: Path | None
    precision: str
    quality: str | None
    obj: str | None
    input_name: str | None
    eval_inputs: str | None
    warmup: int
    runs: int
    record: int
    out: Path | None
    no_trace: bool
    no_verify: bool
    cycle: int


def tune_target(target: str, flags: TuneFlags, *, keep: bool, history_db: str | None, as_json: bool) -> None:
    """Capture ``target``, tune what suggest ranks highest (or the flags' targets, or what their plan holds), verify,
    capture again; write the folder and print the tuned regions."""
    require_torch("tune")
    check_positive("--time-budget", flags.time_budget, "seconds", "--time-budget 600")
    from aitune.cli import outputs
    from aitune.cli.loop import loop_files, loop_view, tune_entry_into
    from aitune.torch.tuning.budget import TimeBudget
    from aitune.torch.tuning.plan_check import load_plan

    # The clock starts here, with the command: the budget bounds everything that follows.
    budget = (
        TimeBudget(flags.time_budget, reserve_factor=RESERVE_AFTER_TUNING) if flags.time_budget is not None else None
    )

    source, _, function = target.rpartition(":")
    if not function:
        fail(f"tune needs an entry function: write {target}:infer (the function that runs one inference).")
    config = loop_config(flags, budget)
    folder = flags.out or outputs.default_folder(source, f"{function}-tuned")
    plan = flags.plan
    outputs.refuse_overwriting_inputs({"--out": loop_files(folder)}, [plan, Path(source)])
    checked = load_plan(plan) if plan is not None else None  # refused before the app is loaded or --out made
    with contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
        result, files = tune_entry_into(
            folder,
            source,
            function,
            obj=flags.obj,
            input_name=flags.input_name,
            eval_inputs_name=flags.eval_inputs,
            config=config,
            plan=checked,
            keep_traces=not flags.no_trace,
        )
    if keep:
        print(keep_in_history([files.folder], history_db), file=sys.stderr)
    if as_json:
        outputs.print_json({**files.as_dict(), "comparison": result.comparison()})
        return
    console.print(loop_view(result))
    console.print(files.listing(), markup=False)


def loop_config(flags: TuneFlags, budget: TimeBudget | None) -> LoopConfig:
    """The loop's configuration from ``flags``, each checked in turn; a refusal names the flag and the fix."""
    from aitune.compare.quality import check_precision, parse_bar
    from aitune.compare.verification import MAX_CYCLE, VerifyConfig
    from aitune.torch import LoopConfig
    from aitune.torch.tuning.strategies import named_strategy

    check_run_counts(flags.warmup, flags.runs)
    if flags.mode not in ("aot", "jit"):
        fail(f"unknown --mode {flags.mode!r}; choose aot or jit.")
    if flags.top < 1 or flags.record < 1:
        fail(f"--top and --record must be at least 1 (got --top {flags.top}, --record {flags.record}).")
    if not 1 <= flags.cycle <= MAX_CYCLE:
        fail(
            f"--cycle takes the number of calls after which the workload repeats, 1 to {MAX_CYCLE} (got {flags.cycle})."
        )
    check_precision(flags.precision)
    for flag, given, role in (
        ("--eval-inputs", flags.eval_inputs, "feeds"),
        ("--quality", flags.quality, "sets the bar of"),
    ):
        if given is not None and flags.precision == "fp32" and flags.plan is None:
            fail(f"{flag} {role} the task gate, which judges a reduced precision: pass --precision bf16 or int8.")
    bar = parse_bar(flags.quality) if flags.quality is not None else None
    strategy = named_strategy(
        flags.strategy,
        words(flags.backends),
        parse_tolerance(flags.tolerance),
        budget=budget,
        precision=flags.precision,
    )
    return LoopConfig(
        top=flags.top,
        targets=tuple(words(flags.targets)) or None,
        mode=flags.mode,
        strategy=strategy,
        precision=flags.precision,
        quality=bar,
        warmup_runs=flags.warmup,
        measured_runs=flags.runs,
        record_calls=flags.record,
        verification=None if flags.no_verify else VerifyConfig(cycle=flags.cycle),
    )
