"""The ways a region gets tuned: wrapped and tuned once (AOT), registered and tuned on the workload's own calls
(JIT), re-applied from a plan, or the model tuned whole under the decoder recipe; each gives a `Tuning`."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any

import torch
from torch import nn

from aitune.analysis.statistics import paired_speedup_figure
from aitune.errors import TuningError
from aitune.markers import AOT_REGION_KIND, region_id
from aitune.torch.decoder_recipe import RECIPE, STATIC_CACHE, generation, swap_generation
from aitune.torch.devices import module_device
from aitune.torch.jit import JitConfig, register_for_jit_tuning
from aitune.torch.jit.patched_module import jit_switch
from aitune.torch.jit.state import JitState
from aitune.torch.loop.config import LoopConfig, PhaseHook
from aitune.torch.loop.record import Tuning
from aitune.torch.performance.entry import counted
from aitune.torch.performance.inputs import normalize_input
from aitune.torch.tuning.api import record, tune_recorded
from aitune.torch.tuning.measure import MeasureConfig, measure_interleaved
from aitune.torch.tuning.outcome import EAGER, RegionOutcome
from aitune.torch.tuning.paths import WHOLE, unwrap, wrap
from aitune.torch.tuning.plan_apply import apply_plan
from aitune.torch.tuning.plan_write import TunedRegion
from aitune.torch.tuning.strategies import MinLatencyStrategy, TuneStrategy
from aitune.torch.tuning.verify import Switch, aot_switch
from aitune.torch.tuning.wrapper import saved_form


def strategy_of(config: LoopConfig) -> TuneStrategy:
    return config.strategy or MinLatencyStrategy(tolerance=config.tolerance, precision=config.precision)


def tune_aot(
    obj: Any, function: Callable[..., Any], input_data: Any, paths: list[str], config: LoopConfig, phase: PhaseHook
) -> Tuning:
    """Wrap ``paths``, record and tune them; the ones no backend won for are unwrapped again."""
    wrappers = wrap(obj, paths)
    strategy = strategy_of(config)
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
    return Tuning(tuned, tried, outcomes, lambda: unwrap(obj, kept), switches)


def tune_jit(
    obj: Any, function: Callable[..., Any], input_data: Any, paths: list[str], config: LoopConfig, phase: PhaseHook
) -> Tuning:
    """Register ``paths`` for JIT tuning and run the workload until each has tuned (or stayed eager)."""
    strategy = strategy_of(config)
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
    return Tuning(tuned, tried, outcomes, registration.detach, switches)


def applied_plan(obj: Any, plan: Mapping[str, Any]) -> Tuning:
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

    return Tuning(tuned, None, outcomes, undo, switches, generation=plan.get("generation"))


SETTINGS_COST_MEASURE = MeasureConfig(warmup=1, min_repeats=5, max_repeats=9, target_cv=0.02, max_seconds=2.0)
"""Eager with the recipe's settings against eager without: a static cache is allocated at its full length on each
``generate`` and every step masks over it, work outside the modules that a capture with the dynamic cache never saw."""


def settings_cost(obj: Any, function: Callable[..., Any], input_data: Any, settings: Mapping[str, Any]) -> float:
    """How many times as long the workload runs eagerly with the generation ``settings``: the median over rounds
    timed in turns (`SETTINGS_COST_MEASURE`) of each round's with ÷ without (the project's paired statistic)."""
    args, kwargs = normalize_input(input_data)

    def changed() -> None:
        with generation(obj, settings):
            function(*args, **kwargs)

    device = module_device(obj) if isinstance(obj, nn.Module) else torch.device("cpu")
    without, with_settings = measure_interleaved(
        [lambda: function(*args, **kwargs), changed], SETTINGS_COST_MEASURE, device
    )
    figure = paired_speedup_figure(with_settings.times_us, without.times_us)
    return figure.median if figure is not None else 1.0  # no round with a time: no cost seen


def tune_recipe(
    obj: Any,
    function: Callable[..., Any],
    input_data: Any,
    config: LoopConfig,
    phase: PhaseHook,
    verify: Callable[[Tuning], Tuning],
) -> Tuning | None:
    """The decoder recipe (`aitune.torch.decoder_recipe`): the model tuned whole while ``generate`` uses a static
    cache, verified end to end against the model as it was; None when the workload never calls the model's own
    forward. Whatever does not stay tuned leaves the generation settings as they were."""
    phase("time the static cache eagerly", None)
    cost = settings_cost(obj, function, input_data, STATIC_CACHE)
    earlier = swap_generation(obj, STATIC_CACHE)
    try:
        tuning = tune_aot(obj, function, input_data, [WHOLE], config, phase)
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
    recipe = replace(
        tuning, outcomes=outcomes, switches=switches, undo=undo, generation=dict(STATIC_CACHE), generation_cost=cost
    )
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


def retuned_at_fp32(
    obj: Any,
    function: Callable[..., Any],
    input_data: Any,
    config: LoopConfig,
    phase: PhaseHook,
    tune_paths: Callable[..., Tuning],
    paths: list[str],
) -> Tuning:
    """``paths`` tuned again among the fp32 candidates of the loop's strategy (its budget shared), unverified."""
    fp32 = replace(config, strategy=strategy_of(config).at_fp32(), precision="fp32")
    return tune_paths(obj, function, input_data, paths, fp32, phase)
