"""`optimize`: capture before, search (or apply a plan), verify, capture after, and the loop's reports and plan."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from torch import nn

from aitune.compare import compare_profiles
from aitune.compare.gains import region_gains, untuned_slowdowns, whole_model_forecast, with_settings_cost
from aitune.compare.quality import check_precision
from aitune.errors import TuningError
from aitune.report import ProfileDoc
from aitune.suggest import Suggestions
from aitune.torch.backends.held_memory import process_memory, process_rss_bytes
from aitune.torch.backends.inductor import InductorBackend
from aitune.torch.calibration import ensure_calibration
from aitune.torch.devices import module_device
from aitune.torch.loop.config import LoopConfig, LoopResult, PhaseHook, Tick, silent
from aitune.torch.loop.gates import precision_choices, put_back_whole, slower_after_tuning, verified
from aitune.torch.loop.outputs import plan_of, report_of
from aitune.torch.loop.search import search
from aitune.torch.loop.ways import applied_plan
from aitune.torch.model_state import KeptState
from aitune.torch.performance.capture import planned_calls, resolve_operator_runs
from aitune.torch.performance.entry import counted
from aitune.torch.performance.profile import profile, state_roots
from aitune.torch.performance.regions import discover_targets
from aitune.torch.precision import precision_unavailable
from aitune.torch.registry import MODULE_REGISTRY
from aitune.torch.tuning.calibrate import calibrate
from aitune.torch.tuning.collective import job_document, job_figures, together, world_size
from aitune.torch.tuning.paths import WHOLE
from aitune.torch.tuning.plan_apply import check_fits, check_world_size
from aitune.torch.tuning.plan_check import load_plan


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
    phase = on_phase or silent
    traces = trace_files or (None, None)

    checked = None
    if plan is not None:  # a bad plan, or one that does not fit obj, is refused before anything runs
        checked = load_plan(plan)
        check_world_size(checked, world_size())
        check_fits(obj, checked)
    precision = _precision(obj, config, checked)
    verify = functools.partial(
        verified,
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
        suggestions, whole, tuning = None, None, verify(applied_plan(obj, checked))
    else:
        suggestions, whole, tuning = search(obj, function, input_data, job_before, config, phase, verify)
    memory = process_memory(rss_before, process_rss_bytes())  # what tuning left in the process, measured
    try:
        after = capture(traces[1], phase("capture after", _calls(config)))
        job_after = job_document(after)
        if config.verification is not None and (loss := slower_after_tuning(job_before, job_after, tuning)) is not None:
            tuning = put_back_whole(tuning, loss)
            after = capture(traces[1], phase("capture after, everything put back", _calls(config)))
            job_after = job_document(after)
        ranks = job_figures(before, after, job_before)
    except BaseException:
        tuning.undo()
        raise
    saved = plan_of(obj, tuning, checked, config.tolerance, precision, memory, ranks)
    diff = compare_profiles(job_before, job_after)
    verification = tuning.verification
    checks = {check.path: check for check in verification.checks} if verification is not None else None
    priced = _priced_for_winners(suggestions, tuning.outcomes) if suggestions is not None else None
    forecasts = priced.forecasts() if priced is not None else {}
    # The whole model is also tuned by the decoder recipe, which weighs nothing: its forecast is suggest's, with
    # what its settings cost the eager run (timed before tuning) added.
    whole_predicted = whole_model_forecast(priced) if priced is not None else None
    if whole_predicted is not None and tuning.generation_cost is not None:
        whole_predicted = with_settings_cost(whole_predicted, tuning.generation_cost)
    gains = region_gains(forecasts, diff, tuning.outcomes, whole_predicted, checks)
    slowdowns = untuned_slowdowns(diff, [region.path for region in tuning.tuned])
    choices = precision_choices(tuning, precision)
    report = report_of(tuning, precision, choices, memory, ranks)
    return LoopResult(
        before, after, priced, report, diff, gains, saved, tuning.tuned, whole, tuning.undo,
        verification, slowdowns, precision, tuning.judgment, choices, ranks,
        (job_before, job_after) if ranks is not None else None, tuning.generation,
    )  # fmt: skip


def _priced_for_winners(suggestions: Suggestions, outcomes: Mapping[str, tuple[str, str | None]]) -> Suggestions:
    """Suggest's forecasts priced for the backend that won: the regions Inductor won (every target, when it won the
    whole model) as Inductor runs them (`aitune.suggest.Suggestions.priced_for_inductor`)."""
    won = {path for path, (winner, _) in outcomes.items() if winner == InductorBackend.name}
    return suggestions.priced_for_inductor(None if WHOLE in won else won) if won else suggestions


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
