"""The closed loop: capture before → suggest → wrap and tune → capture after → compare, and a plan to apply later.

Every decision is made by the parts it joins: `aitune.suggest` ranks the regions, `aitune.torch.tune`
records and tunes them behind the correctness gate, `aitune.compare` measures the gain and
`aitune.compare.gains` sets it beside the forecast. A region whose tuning fails, loses or fails the gate is
put back as it was (its wrapper removed), so the after capture shows it untouched.

Before the after capture, the tuned regions are verified end to end (`aitune.torch.tuning.verify`):
whole runs with and without them, alternating in this process, and a region stays tuned only when
the run is faster with it beyond noise; the others are put back too. The plan holds only what
stayed, and a replayed plan is verified the same way.

At a reduced precision (``LoopConfig.precision``: bf16, int8; fp32 is the default and never left
implicitly), the level's backends are judged first on the task (`aitune.torch.tuning.task_gate`):
the workload's final output with them against the original's, by the output's kind, and what fails
is put back before any timing.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from torch import nn

from aitune.compare import ProfileDiff, compare_profiles
from aitune.compare.end_to_end import EndToEnd, end_to_end
from aitune.compare.gains import (
    RegionGain,
    Slowdown,
    WholeModel,
    region_gains,
    untuned_slowdowns,
    weigh_whole_model,
)
from aitune.compare.loop_report import compare_report
from aitune.compare.quality import QualityBar, TaskJudgment, check_precision
from aitune.compare.verification import (
    CAPTURES,
    OUTRUN,
    PairedSpeedup,
    RegionCheck,
    Verification,
    VerifyConfig,
    captured_loss,
)
from aitune.errors import TuningError
from aitune.markers import AOT_REGION_KIND, region_id
from aitune.report import ProfileDoc
from aitune.suggest import Suggestions, suggest
from aitune.torch.backends.held_memory import process_memory, process_rss_bytes
from aitune.torch.calibration import ensure_calibration
from aitune.torch.decoder_recipe import RECIPE, STATIC_CACHE, generation, offers_recipe, swap_generation
from aitune.torch.devices import module_device
from aitune.torch.jit import JitConfig, register_for_jit_tuning
from aitune.torch.jit.patched_module import jit_switch
from aitune.torch.jit.state import JitState
from aitune.torch.model_state import KeptState
from aitune.torch.module.paths import WHOLE, unwrap, wrap
from aitune.torch.module.wrapper import saved_form
from aitune.torch.performance.capture import planned_calls, resolve_operator_runs
from aitune.torch.performance.entry import counted
from aitune.torch.performance.environment import environment
from aitune.torch.performance.inputs import normalize_input
from aitune.torch.performance.profile import profile, state_roots
from aitune.torch.performance.regions import discover_targets, qualified_type
from aitune.torch.precision import precision_unavailable
from aitune.torch.registry import MODULE_REGISTRY
from aitune.torch.tuning.api import record, tune_recorded
from aitune.torch.tuning.budget import TimeBudget
from aitune.torch.tuning.calibrate import calibrate
from aitune.torch.tuning.collective import agreed_refusal, job_document, job_figures, together, world_size
from aitune.torch.tuning.correctness import Tolerance
from aitune.torch.tuning.outcome import EAGER, RegionOutcome
from aitune.torch.tuning.plan_apply import apply_plan, check_fits, check_world_size
from aitune.torch.tuning.plan_check import load_plan
from aitune.torch.tuning.plan_write import TunedRegion, make_plan, replayed_plan
from aitune.torch.tuning.precision_choice import PrecisionChoice, precision_choice
from aitune.torch.tuning.report import tuning_report, weight_memory
from aitune.torch.tuning.strategies import MinLatencyStrategy, TuneStrategy
from aitune.torch.tuning.task_gate import judge_task
from aitune.torch.tuning.verify import Switch, aot_switch, verify_tuned

Tick = Callable[[], None]
PhaseHook = Callable[[str, int | None], Tick]
"""``on_phase(name, calls)`` is told each phase as it starts (with its number of workload calls, when known)
and returns what to call after each of them: a progress bar's advance."""


@dataclass(frozen=True)
class LoopConfig:
    """How the loop captures, chooses and tunes; ``targets`` (paths) overrides suggest's choice of ``top``."""

    top: int = 3
    targets: tuple[str, ...] | None = None
    mode: str = "aot"  # aot: wrap by path and tune once; jit: register by path, tune on the workload's own calls
    strategy: TuneStrategy | None = None  # None: min-latency over the default backends, with ``tolerance``
    tolerance: Tolerance = field(default_factory=Tolerance)
    warmup_runs: int = 3
    measured_runs: int = 10
    record_calls: int = 2  # workload calls recorded for tuning (each wrapper keeps up to 8 samples per graph)
    verification: VerifyConfig | None = field(default_factory=VerifyConfig)  # None: keep what the trials chose
    precision: str = "fp32"  # bf16 or int8: the level's backends, judged on the task (never chosen implicitly)
    quality: QualityBar | None = None  # the task gate's bar; None: the default of the output's kind


@dataclass
class LoopResult:
    """Both profiles, what suggest said, the tuning report, the diff, the gain per region and the plan."""

    before: ProfileDoc
    after: ProfileDoc
    suggestions: Suggestions | None  # None when a plan chose the regions
    tuning: dict[str, Any] | None  # None when a plan was applied
    diff: ProfileDiff
    gains: list[RegionGain]
    plan: dict[str, Any]
    tuned: list[TunedRegion]  # left tuned in the target
    whole_model: WholeModel | None = None  # how the whole model weighed against the separate regions
    undo: Callable[[], None] = field(repr=False, default=lambda: None)
    verification: Verification | None = None  # the end-to-end check of the tuned regions; None: not run
    slowdowns: list[Slowdown] = field(default_factory=list)  # untuned regions slower after tuning, beyond noise
    precision: str = "fp32"
    task_gate: TaskJudgment | None = None  # the task gate's verdict on the reduced-precision regions; None: none ran
    precision_choices: list[PrecisionChoice] = field(default_factory=list)  # reduced precision: each region's level
    ranks: dict[str, Any] | None = None  # under torchrun: each rank's and the job's figures (`rank_figures`)
    job_sides: tuple[ProfileDoc, ProfileDoc] | None = None  # under torchrun: the ranks' merged captures, before/after

    @property
    def end_to_end(self) -> EndToEnd:
        """The end-to-end figure a user reads: the verified one (`aitune.compare.end_to_end`)."""
        return end_to_end(self.diff, self.gains, self.verification)

    def comparison(self) -> dict[str, Any]:
        """The compare report (`aitune.compare.loop_report.compare_report`): the diff, the end-to-end speedup
        (before ÷ after, verified) beside the captures' and the gain per tuned region."""
        return compare_report(
            self.diff,
            self.gains,
            whole_model=self.whole_model,
            verification=self.verification,
            slowdowns=self.slowdowns,
            precision=self.precision,
            task_gate=self.task_gate,
            ranks=self.ranks,
        )

    def restore(self) -> None:
        """Take the tuned wrappers (or JIT registration) out of the target again: its modules run as before."""
        self.undo()
        self.undo, self.tuned = (lambda: None), []


@together  # under torchrun: one decision for the job (`aitune.torch.tuning.collective`)
def optimize(
    obj: Any,
    input_data: Any = None,
    inference_function: Callable[..., Any] | None = None,
    *,
    config: LoopConfig | None = None,
    plan: str | Path | Mapping[str, Any] | None = None,
    eval_inputs: Sequence[Any] = (),
    trace_files: tuple[Path, Path] | None = None,
    on_phase: PhaseHook | None = None,
    obj_name: str | None = None,
    deadline: float | None = None,
) -> LoopResult:
    """Profile ``inference_function(input)`` on ``obj``, tune what suggest ranks highest, and prove the gain.

    With ``plan`` (a path or the loaded dict written by an earlier loop), the regions and backends
    come from the plan instead: nothing is searched, only the chosen backends are built. The tuned
    wrappers stay in ``obj`` (call ``result.restore()`` to take them out); ``trace_files`` keeps
    the before and after Chrome traces; ``obj_name`` names ``obj`` in them as ``profile`` does.
    Whatever was tuned (searched or from the plan) is verified end to end first, and what does not
    make the run faster beyond noise is put back. Under torchrun every rank calls it at the same point:
    suggest reads the ranks' merged capture, each decision is the job's (its slowest rank's), every rank
    ends with the same regions tuned, and the diff is the job's; ``deadline`` (a `time.monotonic` value) cuts the
    verification's extra rounds short. At a reduced precision, the task gate judges the output on
    ``input`` and on each of ``eval_inputs`` (each in the same form as ``input``).

    Example::

        result = aitune.torch.optimize(pipe, {"token_ids": ids}, infer, config=LoopConfig(top=2))
        result.end_to_end.shown()  # '1.60× [1.55, 1.69] faster, verified over 12 alternating … rounds …'
        result.comparison()["speedup"]  # {"value": 1.60, "ci_low": 1.55, "ci_high": 1.69, "source": "verified", …}

    The model's buffers are left as they were found (`KeptState`), also when the loop raises; a model in
    training mode is refused after the first capture, naming ``.eval()``.
    """
    targets = [] if isinstance(obj, nn.Module) else discover_targets(obj, MODULE_REGISTRY)  # a module is kept whole
    with KeptState(state_roots(obj, targets)):
        return _optimize(
            obj, input_data, inference_function, config=config, plan=plan, eval_inputs=eval_inputs,
            trace_files=trace_files, on_phase=on_phase, obj_name=obj_name, deadline=deadline,
        )  # fmt: skip


def _optimize(
    obj: Any,
    input_data: Any,
    inference_function: Callable[..., Any] | None,
    *,
    config: LoopConfig | None,
    plan: str | Path | Mapping[str, Any] | None,
    eval_inputs: Sequence[Any],
    trace_files: tuple[Path, Path] | None,
    on_phase: PhaseHook | None,
    obj_name: str | None,
    deadline: float | None,
) -> LoopResult:
    config = config or LoopConfig()
    function = inference_function if inference_function is not None else obj
    capture = functools.partial(_capture, obj, input_data, function, config, obj_name=obj_name)
    phase = on_phase or _silent
    traces = trace_files or (None, None)

    checked = None
    if plan is not None:  # a bad plan, or one that does not fit obj, is refused before anything runs
        checked = load_plan(plan)
        check_world_size(checked, world_size())
        check_fits(obj, checked)
    precision = _precision(obj, config, checked)
    verify = functools.partial(
        _verified,
        function,
        input_data,
        eval_inputs=tuple(eval_inputs),
        precision=precision,
        quality=config.quality,
        config=config.verification,
        phase=phase,
        deadline=deadline,
        budget=config.strategy.budget if config.strategy is not None else None,
    )
    calibration = ensure_calibration(calibrate) if plan is None else None  # the gain model's figures for suggest
    before = capture(traces[0], phase("capture before", _calls(config)))
    _refuse_training_mode(before)
    if calibration is not None:
        before.setdefault("environment", {})["gain_calibration"] = calibration.to_dict()
    job_before = job_document(before)  # under torchrun, the ranks' captures merged: every rank reads the same
    rss_before = process_rss_bytes()
    if checked is not None:
        phase("apply plan", None)
        suggestions, whole, tuning = None, None, verify(_applied(obj, checked))
    else:
        suggestions, whole, tuning = _search(obj, function, input_data, job_before, config, phase, verify)
    memory = process_memory(rss_before, process_rss_bytes())  # what tuning left in the process, measured
    try:
        after = capture(traces[1], phase("capture after", _calls(config)))
        job_after = job_document(after)
        if config.verification is not None and (loss := _captured_loss(job_before, job_after, tuning)) is not None:
            tuning = _put_back_whole(tuning, loss)
            after = capture(traces[1], phase("capture after, everything put back", _calls(config)))
            job_after = job_document(after)
        ranks = job_figures(before, after, job_before)
    except BaseException:
        tuning.undo()
        raise
    # Made from what stayed tuned after the end-to-end check: a plan holds verified wins only.
    judgment = tuning.judgment
    if checked is None:
        tolerance = config.tolerance.to_dict()
        saved = make_plan(
            qualified_type(obj), tuning.tuned, tolerance, precision=precision, task_gate=judgment,
            process_memory=memory, generation=tuning.generation if tuning.tuned else None, distributed=ranks,
        )  # fmt: skip
    else:
        saved = replayed_plan(
            qualified_type(obj), tuning.tuned, checked, task_gate=judgment, process_memory=memory, distributed=ranks
        )
    diff = compare_profiles(job_before, job_after)
    verification = tuning.verification
    checks = {check.path: check for check in verification.checks} if verification is not None else None
    forecasts = suggestions.forecasts() if suggestions is not None else {}
    gains = region_gains(forecasts, diff, tuning.outcomes, whole.predicted_speedup if whole else None, checks)
    slowdowns = untuned_slowdowns(diff, [region.path for region in tuning.tuned])
    report = None
    choices = _precision_choices(tuning, precision)
    if tuning.results is not None:
        report = tuning_report(
            tuple(outcome for trials in tuning.results.values() for outcome in trials),
            environment(),
            {
                **({"verification": verification.to_dict()} if verification is not None else {}),
                "precision": precision,
                "precision_choices": [choice.to_dict() for choice in choices],
                "task_gate": judgment.to_dict() if judgment is not None else None,
                "weight_memory": weight_memory(tuning.tuned),
                # resident bytes before and after tuning, measured
                **({"process_memory": memory} if memory is not None else {}),
                **({"ranks": ranks} if ranks is not None else {}),
            },
        )
    return LoopResult(
        before, after, suggestions, report, diff, gains, saved, tuning.tuned, whole, tuning.undo,
        verification, slowdowns, precision, judgment, choices, ranks,
        (job_before, job_after) if ranks is not None else None,
    )  # fmt: skip


def _refuse_training_mode(before: ProfileDoc) -> None:
    """`TuningError` when the capture saw the model in training mode (``TRAINING_MODE``): a tuned copy of a module
    that updates its statistics or draws a Dropout mask on every call can never match it."""
    for found in before.get("warnings", ()):
        if found["code"] == "TRAINING_MODE":
            raise TuningError(found["message"])


def _precision(obj: Any, config: LoopConfig, plan: Mapping[str, Any] | None) -> str:
    """The level tuned at: the config's (a plan's when one is applied), checked against the strategy and this
    machine; `TuningError` with the reason when it is refused."""
    precision = check_precision(config.precision)
    if plan is not None:
        if precision != "fp32" and precision != plan["precision"]:
            raise TuningError(
                f"the plan was made at precision {plan['precision']}, not {precision}; leave the precision out to "
                "apply it, or tune again at this one."
            )
        precision = plan["precision"]
    elif config.strategy is not None and config.strategy.precision != precision:
        raise TuningError(
            f"the strategy was made for precision {config.strategy.precision} but the loop asks for {precision};"
            " pass the same precision to both."
        )
    device = module_device(obj) if isinstance(obj, nn.Module) else None
    unavailable = precision_unavailable(precision, device or "cpu")
    if unavailable is not None:
        raise TuningError(f"precision {precision} is refused on this machine: {unavailable}.")
    return precision


def _precision_choices(tuning: _Tuning, precision: str) -> list[PrecisionChoice]:
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


def _strategy(config: LoopConfig) -> TuneStrategy:
    return config.strategy or MinLatencyStrategy(tolerance=config.tolerance, precision=config.precision)


def _captured_loss(before: ProfileDoc, after: ProfileDoc, tuning: _Tuning) -> PairedSpeedup | None:
    """The captures' speedup when the run after tuning was slower than before beyond noise (`captured_loss`)."""
    if not tuning.tuned:
        return None
    change = compare_profiles(before, after).run_time
    return captured_loss(change.ratio, change.ci_low, change.ci_high, len(after["runs"]))


def _put_back_whole(tuning: _Tuning, loss: PairedSpeedup) -> _Tuning:
    """Every tuned region put back, each with the captures' figure as its check: nothing stays changed."""
    tuning.undo()
    put_back = {region.path: RegionCheck(region.path, False, CAPTURES, loss) for region in tuning.tuned}
    earlier = tuning.verification.checks if tuning.verification is not None else []
    checks = [put_back.pop(check.path, check) for check in earlier] + list(put_back.values())
    end_to_end = tuning.verification.end_to_end if tuning.verification is not None else None
    return replace(tuning, tuned=[], switches={}, undo=_nothing, verification=Verification(checks, end_to_end))


def _nothing() -> None:
    """What undoing a tuning that was already put back does."""


def _verified(
    function: Callable[..., Any],
    input_data: Any,
    tuning: _Tuning,
    *,
    eval_inputs: tuple[Any, ...] = (),
    precision: str,
    quality: QualityBar | None,
    config: VerifyConfig | None,
    phase: PhaseHook,
    deadline: float | None,
    budget: TimeBudget | None = None,
    retune: Callable[[list[str]], _Tuning] | None = None,
) -> _Tuning:
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
        tuning = _joined(tuning, again)
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


def _trials(first: _Tuning, then: _Tuning) -> dict[str, tuple[RegionOutcome, ...]]:
    """Every path's trials of ``first`` and then of ``then``, in that order."""
    trials = dict(first.results or {})
    for path, outcomes in (then.results or {}).items():
        trials[path] = (*trials.get(path, ()), *outcomes)
    return trials


def _joined(first: _Tuning, again: _Tuning) -> _Tuning:
    """``first`` with the regions ``again`` tuned anew (at fp32, after the task gate refused their reduced winner):
    both trials kept in order, ``again``'s winner and reason for those paths, and one undo for both."""
    outcomes = {
        path: (winner, f"{first.outcomes[path][1]}; at fp32: {reason}" if reason and path in first.outcomes else reason)
        for path, (winner, reason) in again.outcomes.items()
    }

    def undo() -> None:
        first.undo()
        again.undo()

    return replace(
        first,
        tuned=[*first.tuned, *again.tuned],
        results=_trials(first, again),
        outcomes={**first.outcomes, **outcomes},
        undo=undo,
        switches={**first.switches, **again.switches},
    )


def _retuned_at_fp32(
    obj: Any,
    function: Callable[..., Any],
    input_data: Any,
    config: LoopConfig,
    phase: PhaseHook,
    tune_paths: Callable[..., _Tuning],
    paths: list[str],
) -> _Tuning:
    """``paths`` tuned again among the fp32 candidates of the loop's strategy (its budget shared), unverified."""
    fp32 = replace(config, strategy=_strategy(config).at_fp32(), precision="fp32")
    return tune_paths(obj, function, input_data, paths, fp32, phase)


def _judged(
    function: Callable[..., Any],
    inputs: Sequence[Any],
    tuning: _Tuning,
    precision: str,
    quality: QualityBar | None,
    phase: PhaseHook,
) -> _Tuning:
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


def _search(
    obj: Any,
    function: Callable[..., Any],
    input_data: Any,
    before: ProfileDoc,
    config: LoopConfig,
    phase: PhaseHook,
    verify: Callable[[_Tuning], _Tuning],
) -> tuple[Suggestions, WholeModel | None, _Tuning]:
    """Suggest, choose the paths (or the whole model), tune them in the configured mode and ``verify`` them."""
    found = suggest(before)
    paths = list(config.targets) if config.targets else _chosen(found, config.top)
    if config.strategy is not None:  # a time budget is shared among the regions by the time each should save
        config.strategy.expect({t.path: 1.0 - 1.0 / t.predicted_speedup for t in found.targets if t.path in paths})
    recipe = None
    if not config.targets and config.mode == "aot" and offers_recipe(obj):
        recipe = _tune_recipe(obj, function, input_data, config, phase, verify)
        if recipe is not None and recipe.tuned:  # the modules are compiled on the workload as it was, then weighed
            with recipe.switches[WHOLE].original():
                modules = verify(_tune_aot(obj, function, input_data, paths, config, phase))
            return found, None, _faster_of(recipe, modules)
    whole, tuning = _search_modules(obj, function, input_data, found, paths, config, phase, verify)
    return found, whole, _after(recipe, tuning) if recipe is not None else tuning


def _after(earlier: _Tuning, tuning: _Tuning) -> _Tuning:
    """``tuning`` with what an ``earlier`` way of tuning tried and put back kept in its report."""
    checks = earlier.verification.checks if earlier.verification is not None else []
    verification = tuning.verification
    if checks:
        later = verification.checks if verification is not None else []
        verification = Verification([*checks, *later], verification.end_to_end if verification is not None else None)
    return replace(
        tuning,
        results=_trials(earlier, tuning),
        outcomes={**earlier.outcomes, **tuning.outcomes},
        verification=verification,
        refusals={**earlier.refusals, **tuning.refusals},
    )


def _search_modules(
    obj: Any,
    function: Callable[..., Any],
    input_data: Any,
    found: Suggestions,
    paths: list[str],
    config: LoopConfig,
    phase: PhaseHook,
    verify: Callable[[_Tuning], _Tuning],
) -> tuple[WholeModel | None, _Tuning]:
    """Tune the chosen ``paths`` in the configured mode, or the whole model first where that is predicted no
    worse, and ``verify`` them."""
    # JIT takes one registration per process, so only AOT can fall back from the whole model to its parts.
    weigh = not config.targets and config.mode != "jit" and isinstance(obj, nn.Module)
    whole = weigh_whole_model(found, paths) if weigh else None
    tune_paths = _tune_jit if config.mode == "jit" else _tune_aot
    # JIT registers once per process: a region it put back stays eager; so does one with no fp32 backend to try.
    if config.mode != "jit" and _strategy(config).at_fp32().backends:
        retune = functools.partial(_retuned_at_fp32, obj, function, input_data, config, phase, tune_paths)
        verify = functools.partial(verify, retune=retune)
    if whole is not None and whole.chosen:
        return whole, _tune_whole_first(obj, function, input_data, paths, config, phase, tune_paths, verify)
    return whole, verify(tune_paths(obj, function, input_data, paths, config, phase))


@dataclass(frozen=True)
class _Tuning:
    """What one way of tuning left: the tuned regions, what tuning each gave, each path's winner and reason, and its
    undo."""

    tuned: list[TunedRegion]
    results: dict[str, tuple[RegionOutcome, ...]] | None  # by path, each trial in order; None: a plan was applied
    outcomes: dict[str, tuple[str, str | None]]
    undo: Callable[[], None]
    switches: dict[str, Switch]  # by tuned path: how to run its original code, how to put it back
    verification: Verification | None = None  # once verified
    judgment: TaskJudgment | None = None  # the task gate's, at a reduced precision
    refusals: dict[str, str] = field(default_factory=dict)  # by path: why the task gate put its reduced winner back
    generation: Mapping[str, str] | None = None  # the generate settings it runs under (the decoder recipe's)


def _tune_whole_first(
    obj: Any,
    function: Callable[..., Any],
    input_data: Any,
    paths: list[str],
    config: LoopConfig,
    phase: PhaseHook,
    tune_paths: Callable[..., _Tuning],
    verify: Callable[[_Tuning], _Tuning],
) -> _Tuning:
    """Tune ``obj`` whole; if no backend wins for it, or the run is not faster with it, or the workload
    never calls its forward (an entry method such as ``translate`` calls its children), tune the separate
    ``paths`` instead."""
    try:
        whole = verify(tune_paths(obj, function, input_data, [WHOLE], config, phase))
    except TuningError as error:  # nothing was left wrapped: tune_paths unwraps before it raises
        separate = tune_paths(obj, function, input_data, paths, config, phase)
        return verify(replace(separate, outcomes={WHOLE: ("eager", f"not tuned whole: {error}"), **separate.outcomes}))
    if whole.tuned:
        return whole
    separate = tune_paths(obj, function, input_data, paths, config, phase)
    results = {**(whole.results or {}), **(separate.results or {})}
    return verify(
        replace(
            separate, results=results, outcomes={**whole.outcomes, **separate.outcomes}, verification=whole.verification
        )
    )


def _tune_recipe(
    obj: Any,
    function: Callable[..., Any],
    input_data: Any,
    config: LoopConfig,
    phase: PhaseHook,
    verify: Callable[[_Tuning], _Tuning],
) -> _Tuning | None:
    """The decoder recipe (`aitune.torch.decoder_recipe`): the model tuned whole while ``generate`` uses a static
    cache, verified end to end against the model as it was; None when the workload never calls the model's own
    forward. Whatever does not stay tuned leaves the generation settings as they were."""
    earlier = swap_generation(obj, STATIC_CACHE)
    try:
        tuning = _tune_aot(obj, function, input_data, [WHOLE], config, phase)
    except TuningError:
        swap_generation(obj, earlier)
        return None
    except BaseException:
        swap_generation(obj, earlier)
        raise
    outcomes = {
        path: (winner, f"the decoder recipe ({RECIPE})" + (f": {reason}" if reason else ""))
        for path, (winner, reason) in tuning.outcomes.items()
    }
    if not tuning.tuned:
        swap_generation(obj, earlier)
        return replace(tuning, outcomes=outcomes)

    def undo() -> None:
        tuning.undo()
        swap_generation(obj, earlier)

    switches = {WHOLE: _recipe_switch(obj, earlier, tuning.switches[WHOLE])}
    recipe = replace(tuning, outcomes=outcomes, switches=switches, undo=undo, generation=dict(STATIC_CACHE))
    return verify(recipe)


def _recipe_switch(obj: Any, earlier: Mapping[str, Any], compiled: Switch) -> Switch:
    """The decoder recipe's switch: its original code is the generation settings as they were (``earlier``) with
    the compiled model's original forward; putting it back removes the compiled model and restores the settings."""

    @contextlib.contextmanager
    def original() -> Iterator[None]:
        with generation(obj, earlier), compiled.original():
            yield

    def put_back() -> None:
        compiled.put_back()
        swap_generation(obj, earlier)

    return Switch(original, put_back)


def _faster_of(recipe: _Tuning, modules: _Tuning) -> _Tuning:
    """The verified recipe or the modules compiled as they run, whichever made the run faster end to end (the
    higher median of its alternating rounds against eager); the other is put back, its check saying why."""
    figure = recipe.verification.end_to_end if recipe.verification is not None else None
    other = modules.verification.end_to_end if modules.tuned and modules.verification is not None else None
    modules_won = other is not None and figure is not None and other.median > figure.median
    winner, loser = (modules, recipe) if modules_won else (recipe, modules)
    loser.undo()
    lost = [
        RegionCheck(check.path, False, OUTRUN, check.speedup) if check.kept else check
        for check in (loser.verification.checks if loser.verification is not None else [])
    ]
    return _after(replace(loser, verification=Verification(lost, None)), winner)


def _chosen(found: Suggestions, top: int) -> list[str]:
    chosen = [target.path for target in found.recommended(top)]
    if not chosen:
        reasons = "; ".join(f"{t.path}: {t.reasons[0].message}" for t in found.targets[:3] if t.reasons)
        raise TuningError(
            f"suggest found no region worth tuning ({reasons or 'no tunable region'}); "
            "pass the paths to tune with --targets to tune some anyway."
        )
    return chosen


def _tune_aot(
    obj: Any, function: Callable[..., Any], input_data: Any, paths: list[str], config: LoopConfig, phase: PhaseHook
) -> _Tuning:
    """Wrap ``paths``, record and tune them; the ones no backend won for are unwrapped again."""
    wrappers = wrap(obj, paths)
    strategy = _strategy(config)
    try:
        recording = counted(function, phase("record", config.record_calls))
        record(recording, [input_data] * config.record_calls, list(wrappers.values()))
        tick = phase("tune", len(wrappers))
        tune_recorded(list(wrappers.values()), strategy=strategy, on_tuned=lambda _wrapper: tick())
    except BaseException:
        unwrap(obj, paths)
        raise
    results = {path: wrapper.outcome for path, wrapper in wrappers.items()}
    outcomes = {path: (result.winner, result.lost_because) for path, result in results.items() if result is not None}
    kept = [path for path, (winner, _) in outcomes.items() if winner != "eager"]
    unwrap(obj, [path for path in paths if path not in kept])
    tuned = [TunedRegion(path, "aot", wrappers[path].module, wrappers[path].to_dict(), results[path]) for path in kept]
    switches = {path: aot_switch(wrappers[path], functools.partial(unwrap, obj, [path])) for path in kept}
    tried = {path: (result,) for path, result in results.items() if result is not None}
    return _Tuning(tuned, tried, outcomes, lambda: unwrap(obj, kept), switches)


def _tune_jit(
    obj: Any, function: Callable[..., Any], input_data: Any, paths: list[str], config: LoopConfig, phase: PhaseHook
) -> _Tuning:
    """Register ``paths`` for JIT tuning and run the workload until each has tuned (or stayed eager)."""
    strategy = _strategy(config)
    registration = register_for_jit_tuning(
        paths, JitConfig(tune_after=config.record_calls, strategy=strategy), root=obj
    )
    args, kwargs = normalize_input(input_data)
    settling = (JitState.INIT, JitState.RECORDING)
    try:
        tick = phase("record and tune", config.record_calls + 1)
        # Each target runs at least once a call, so record_calls calls reach tune_after; one more lets it tune.
        for _ in range(config.record_calls + 1):
            function(*args, **kwargs)
            tick()
            if not any(patched.state in settling for patched in registration.patched):
                break
    except BaseException:
        registration.detach()
        raise
    results = [patched.outcome for patched in registration.patched]
    outcomes, tuned, switches = {}, [], {}
    for path, patched, result in zip(paths, registration.patched, results, strict=True):
        if patched.state is JitState.TUNED:
            saved = saved_form(path, "tuned", list(patched.recording.graphs.values()), patched.runners)
            tuned.append(TunedRegion(path, "jit", patched.module, saved, result))
            switches[path] = jit_switch(patched)
        winner = result.winner if result is not None else EAGER
        outcomes[path] = (winner, None if patched.state is JitState.TUNED else patched.reason)
    tried = {path: (result,) for path, result in zip(paths, results, strict=True) if result is not None}
    return _Tuning(tuned, tried, outcomes, registration.detach, switches)


def _applied(obj: Any, plan: Mapping[str, Any]) -> _Tuning:
    applied = apply_plan(obj, plan)
    tuned = [TunedRegion(path, "aot", w.module, w.to_dict(), None) for path, w in applied.wrappers.items()]
    replayed = {
        region.path: RegionOutcome.replayed(region.path, region_id(AOT_REGION_KIND, region.path), region.backends)
        for region in tuned
    }
    outcomes = {path: (outcome.winner, None) for path, outcome in replayed.items()}
    switches = {
        path: aot_switch(wrapper, functools.partial(unwrap, obj, [path])) for path, wrapper in applied.wrappers.items()
    }
    earlier = applied.generation_before
    if earlier is not None and WHOLE in switches:  # the decoder recipe: its switch also turns the setting back
        switches[WHOLE] = _recipe_switch(obj, earlier, switches[WHOLE])

    def undo() -> None:
        unwrap(obj, list(applied.wrappers))
        if earlier is not None:
            swap_generation(obj, earlier)

    return _Tuning(tuned, None, outcomes, undo, switches, generation=plan.get("generation"))


def _capture(
    obj: Any,
    input_data: Any,
    function: Callable[..., Any],
    config: LoopConfig,
    trace: Path | None,
    tick: Tick,
    *,
    obj_name: str | None,
) -> ProfileDoc:
    call = counted(function, tick)
    prof = profile(obj, input_data, call, config.warmup_runs, config.measured_runs, trace, obj_name=obj_name)
    doc = prof.data
    if trace is not None:
        doc["trace_file"] = trace.name
    return doc


def _calls(config: LoopConfig) -> int:
    """A default capture's calls when its measured runs need no setting aside (`planned_calls`)."""
    return planned_calls(config.warmup_runs, config.measured_runs, resolve_operator_runs(None))


def _silent(_name: str, _calls: int | None) -> Tick:
    return lambda: None
