"""What keeps a tuned region tuned: the task gate at a reduced precision, then the end-to-end check; the
captures' own loss putting everything back; and the level each region ended at, with why."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from aitune.compare import compare_profiles
from aitune.compare.quality import QualityBar
from aitune.compare.verification import CAPTURES, PairedSpeedup, RegionCheck, Verification, VerifyConfig, captured_loss
from aitune.report import ProfileDoc
from aitune.torch.loop.config import PhaseHook
from aitune.torch.loop.record import Tuning, joined
from aitune.torch.tuning.budget import TimeBudget
from aitune.torch.tuning.collective import agreed_refusal
from aitune.torch.tuning.outcome import EAGER
from aitune.torch.tuning.plan_write import TunedRegion
from aitune.torch.tuning.precision_choice import PrecisionChoice, precision_choice
from aitune.torch.tuning.task_gate import judge_task
from aitune.torch.tuning.verify import verify_tuned


def verified(
    function: Callable[..., Any],
    input_data: Any,
    tuning: Tuning,
    *,
    eval_inputs: tuple[Any, ...] = (),
    precision: str,
    quality: QualityBar | None,
    config: VerifyConfig | None,
    phase: PhaseHook,
    deadline: float | None,
    budget: TimeBudget | None = None,
    retune: Callable[[list[str]], Tuning] | None = None,
) -> Tuning:
    """Judge the reduced-precision regions on the task, then verify the tuned regions end to end, putting back
    the ones that fail or do not win: the tuning of what stayed, with the verification (joined to one made
    before, as when the whole model was put back first). A region whose reduced winner the task gate put back
    is tuned again among the fp32 backends by ``retune`` (when given), and verified with the others."""
    tuning = _judged(function, (input_data, *eval_inputs), tuning, precision, quality, phase)
    if retune is not None and tuning.refusals:
        try:
            again = retune(list(tuning.refusals))
        except BaseException:  # what stayed tuned before is put back too: the loop leaves nothing half done
            tuning.undo()
            raise
        tuning = joined(tuning, again)
    if config is None or not tuning.tuned:
        return tuning
    if deadline is None and budget is not None:  # the whole command's budget: leave time for the after capture
        deadline = budget.verification_deadline()
    switches = {region.path: tuning.switches[region.path] for region in tuning.tuned}
    most_runs = 2 * (config.max_rounds + 1) * (len(switches) + 1)  # see aitune.compare.verification: bounded
    try:
        verification = verify_tuned(
            function, input_data, switches, config, deadline=deadline, tick=phase("verify", most_runs)
        )
    except BaseException:
        tuning.undo()
        raise
    if tuning.verification is not None:
        verification = Verification([*tuning.verification.checks, *verification.checks], verification.end_to_end)
    kept = set(verification.kept)
    tuned = [region for region in tuning.tuned if region.path in kept]
    return replace(tuning, tuned=tuned, switches={path: switches[path] for path in kept}, verification=verification)


def _judged(
    function: Callable[..., Any],
    inputs: Sequence[Any],
    tuning: Tuning,
    precision: str,
    quality: QualityBar | None,
    phase: PhaseHook,
) -> Tuning:
    """The tuning left after the task gate: regions whose backends compute at a reduced precision are judged on
    the workload's final output, and those that fail are put back (their outcome says why, with the figure)."""
    reduced = [region.path for region in tuning.tuned if _reduced(region)]
    if precision == "fp32" or not reduced:
        return tuning
    tick = phase("task gate", len(reduced) + 3)
    try:
        judgment = judge_task(function, inputs, tuning.switches, reduced, precision, quality)
    except BaseException:
        tuning.undo()
        raise
    tick()
    refused = agreed_refusal(None if judgment.passed else judgment.line(), "task gate")  # any rank's refuses for all
    kept = set(judgment.regions) if refused is None else set()
    dropped = [path for path in reduced if path not in kept]
    refusals = {path: f"{tuning.outcomes[path][0]} put back by the {judgment.line()}" for path in dropped}
    outcomes = {
        path: ("eager", refusals[path]) if path in refusals else (winner, reason)
        for path, (winner, reason) in tuning.outcomes.items()
    }
    tuned = [region for region in tuning.tuned if region.path not in dropped]
    switches = {path: switch for path, switch in tuning.switches.items() if path not in dropped}
    return replace(tuning, tuned=tuned, outcomes=outcomes, switches=switches, judgment=judgment, refusals=refusals)


def _reduced(region: TunedRegion) -> bool:
    """Whether any graph of the region runs a backend of a reduced precision."""
    return region.precision != "fp32"


def slower_after_tuning(before: ProfileDoc, after: ProfileDoc, tuning: Tuning) -> PairedSpeedup | None:
    """The captures' speedup when the run after tuning was slower than before beyond noise (`captured_loss`)."""
    if not tuning.tuned:
        return None
    change = compare_profiles(before, after).run_time
    return captured_loss(change.ratio, change.ci_low, change.ci_high, len(after["runs"]))


def put_back_whole(tuning: Tuning, loss: PairedSpeedup) -> Tuning:
    """Every tuned region put back, each with the captures' figure as its check: nothing stays changed."""
    tuning.undo()
    put_back = {region.path: RegionCheck(region.path, False, CAPTURES, loss) for region in tuning.tuned}
    earlier = tuning.verification.checks if tuning.verification is not None else []
    checks = [put_back.pop(check.path, check) for check in earlier] + list(put_back.values())
    end_to_end = tuning.verification.end_to_end if tuning.verification is not None else None
    return replace(tuning, tuned=[], switches={}, undo=_nothing, verification=Verification(checks, end_to_end))


def _nothing() -> None:
    """What undoing a tuning that was already put back does."""


def precision_choices(tuning: Tuning, precision: str) -> list[PrecisionChoice]:
    """At a reduced precision, which level each tried region ended at and why (the task gate's or the end-to-end
    check's reason where one put it back)."""
    if precision == "fp32" or tuning.results is None:
        return []
    runs = {region.path: (region.report.winner if region.report else EAGER) for region in tuning.tuned}
    checks = {check.path: check for check in tuning.verification.checks} if tuning.verification is not None else {}
    choices = []
    for path, trials in tuning.results.items():
        winner, reason = tuning.outcomes.get(path, (EAGER, None))
        check = checks.get(path)
        put_back = check.verdict(winner) if check is not None and not check.kept else reason
        if path in tuning.refusals:  # the reduced winner refused on the task, then the region tuned again at fp32
            choice = precision_choice(path, trials[0], EAGER, tuning.refusals[path])
            then = f"kept {runs[path]}" if path in runs else put_back or "the region runs eager"
            choice = replace(choice, why=f"{choice.why}; tuned again at fp32: {then}") if choice else None
        else:
            choice = precision_choice(path, trials[-1], runs.get(path, EAGER), put_back)
        if choice is not None:
            choices.append(choice)
    return choices
