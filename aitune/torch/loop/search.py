"""Choosing what to tune: suggest's paths (or the user's), the whole model weighed against its parts, the
decoder recipe against the modules compiled as they run."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from torch import nn

from aitune.compare.gains import WholeModel, weigh_whole_model
from aitune.compare.verification import OUTRUN, RegionCheck, Verification
from aitune.errors import TuningError
from aitune.report import ProfileDoc
from aitune.suggest import Suggestions, suggest
from aitune.torch.decoder_recipe import offers_recipe
from aitune.torch.loop.config import LoopConfig, PhaseHook
from aitune.torch.loop.record import Tuning, with_earlier
from aitune.torch.loop.ways import retuned_at_fp32, strategy_of, tune_aot, tune_jit, tune_recipe
from aitune.torch.tuning.paths import WHOLE


def search(
    obj: Any,
    function: Callable[..., Any],
    input_data: Any,
    before: ProfileDoc,
    config: LoopConfig,
    phase: PhaseHook,
    verify: Callable[[Tuning], Tuning],
) -> tuple[Suggestions, WholeModel | None, Tuning]:
    """Suggest, choose the paths (or the whole model), tune them in the configured mode and ``verify`` them."""
    found = suggest(before)
    paths = list(config.targets) if config.targets else _chosen(found, config.top)
    if config.strategy is not None:  # a time budget is shared among the regions by the time each should save
        config.strategy.expect({t.path: 1.0 - 1.0 / t.predicted_speedup for t in found.targets if t.path in paths})
    recipe = None
    if not config.targets and config.mode == "aot" and offers_recipe(obj):
        recipe = tune_recipe(obj, function, input_data, config, phase, verify)
        if recipe is not None and recipe.tuned:  # the modules are compiled on the workload as it was, then weighed
            with recipe.switches[WHOLE].original():
                modules = verify(tune_aot(obj, function, input_data, paths, config, phase))
            return found, None, _faster_of(recipe, modules)
    whole, tuning = _search_modules(obj, function, input_data, found, paths, config, phase, verify)
    return found, whole, with_earlier(recipe, tuning) if recipe is not None else tuning


def _search_modules(
    obj: Any,
    function: Callable[..., Any],
    input_data: Any,
    found: Suggestions,
    paths: list[str],
    config: LoopConfig,
    phase: PhaseHook,
    verify: Callable[[Tuning], Tuning],
) -> tuple[WholeModel | None, Tuning]:
    """Tune the chosen ``paths`` in the configured mode, or the whole model first where that is predicted no
    worse, and ``verify`` them."""
    # JIT takes one registration per process, so only AOT can fall back from the whole model to its parts.
    weigh = not config.targets and config.mode != "jit" and isinstance(obj, nn.Module)
    whole = weigh_whole_model(found, paths) if weigh else None
    tune_paths = tune_jit if config.mode == "jit" else tune_aot
    # JIT registers once per process: a region it put back stays eager; so does one with no fp32 backend to try.
    if config.mode != "jit" and strategy_of(config).at_fp32().backends:
        retune = functools.partial(retuned_at_fp32, obj, function, input_data, config, phase, tune_paths)
        verify = functools.partial(verify, retune=retune)
    if whole is not None and whole.chosen:
        return whole, tune_whole_first(obj, function, input_data, paths, config, phase, tune_paths, verify)
    return whole, verify(tune_paths(obj, function, input_data, paths, config, phase))


def tune_whole_first(
    obj: Any,
    function: Callable[..., Any],
    input_data: Any,
    paths: list[str],
    config: LoopConfig,
    phase: PhaseHook,
    tune_paths: Callable[..., Tuning],
    verify: Callable[[Tuning], Tuning],
) -> Tuning:
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


def _faster_of(recipe: Tuning, modules: Tuning) -> Tuning:
    """The verified recipe, unless the modules compiled as they run made the run faster end to end beyond the
    noise of both figures (each from its alternating rounds against eager); the other is put back, its check
    saying why. Within the noise the recipe stays: one build, the one its authors document, and a choice that
    does not flip from run to run."""
    figure = recipe.verification.end_to_end if recipe.verification is not None else None
    other = modules.verification.end_to_end if modules.tuned and modules.verification is not None else None
    modules_won = other is not None and figure is not None and other.outruns(figure)
    winner, loser = (modules, recipe) if modules_won else (recipe, modules)
    loser.undo()
    lost = [
        RegionCheck(check.path, False, OUTRUN, check.speedup) if check.kept else check
        for check in (loser.verification.checks if loser.verification is not None else [])
    ]
    return with_earlier(replace(loser, verification=Verification(lost, None)), winner)


def _chosen(found: Suggestions, top: int) -> list[str]:
    chosen = [target.path for target in found.recommended(top)]
    if not chosen:
        reasons = "; ".join(f"{t.path}: {t.reasons[0].message}" for t in found.targets[:3] if t.reasons)
        raise TuningError(
            f"suggest found no region worth tuning ({reasons or 'no tunable region'}); "
            "pass the paths to tune with --targets to tune some anyway."
        )
    return chosen
