"""``aitune.torch.tune``: record every wrapper over a dataset, tune each, and write one tuning report."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from aitune.errors import TuningError
from aitune.torch.performance.environment import environment
from aitune.torch.performance.inputs import normalize_input
from aitune.torch.registry import MODULE_REGISTRY, ModuleRegistry
from aitune.torch.tuning.collective import together
from aitune.torch.tuning.report import save_tuning_report, tuning_report
from aitune.torch.tuning.state import ModuleState
from aitune.torch.tuning.strategies import TuneStrategy
from aitune.torch.tuning.wrapper import Module


@together  # under torchrun: one decision for the job (`aitune.torch.tuning.collective`)
def tune(
    inference_function: Callable[..., Any],
    dataset: Iterable[Any],
    *,
    modules: Iterable[Module] | None = None,
    strategy: TuneStrategy | None = None,
    device: torch.device | str | None = None,
    report_file: str | Path | None = None,
    registry: ModuleRegistry | None = None,
) -> dict[str, Any]:
    """Record ``modules`` (default: every untuned AOT wrapper in the registry) while ``inference_function``
    runs over ``dataset``, then tune each; returns the tuning report and writes it to ``report_file``.

    Each dataset item follows ``profile``'s input convention: a mapping is passed as keyword
    arguments, a tuple as positional arguments, anything else as one argument.
    """
    wrappers = list(modules) if modules is not None else untuned_wrappers(registry or MODULE_REGISTRY)
    record(inference_function, dataset, wrappers)
    report = tune_recorded(wrappers, strategy=strategy, device=device)
    if report_file is not None:
        save_tuning_report(report, report_file)
    return report


def record(inference_function: Callable[..., Any], dataset: Iterable[Any], wrappers: Sequence[Module]) -> None:
    """Run ``inference_function`` over ``dataset`` with every wrapper recording; `TuningError` for one never reached."""
    if not wrappers:
        raise TuningError("no aitune.torch.Module to tune; wrap modules first with aitune.torch.wrap(obj, paths).")
    for wrapper in wrappers:
        wrapper.enable_recording()
    for item in dataset:
        args, kwargs = normalize_input(item)
        inference_function(*args, **kwargs)
    silent = [wrapper.name for wrapper in wrappers if not wrapper.graph_specs]
    if silent:
        raise TuningError(f"the dataset never reached {', '.join(silent)}; check the paths wrapped or the dataset.")


def tune_recorded(
    wrappers: Sequence[Module],
    *,
    strategy: TuneStrategy | None = None,
    device: torch.device | str | None = None,
    on_tuned: Callable[[Module], None] | None = None,
) -> dict[str, Any]:
    """Tune each recorded wrapper in turn (``on_tuned`` is told after each); returns the tuning report."""
    outcomes = []
    for wrapper in wrappers:
        wrapper.tune(device=device, strategy=strategy)
        outcomes.append(wrapper.outcome)
        if on_tuned is not None:
            on_tuned(wrapper)
    return tuning_report(outcomes, environment())


def untuned_wrappers(registry: ModuleRegistry) -> list[Module]:
    """The registry's AOT wrappers that are not tuned yet, in registration order."""
    return [
        entry.hook_target
        for entry in registry
        if isinstance(entry.hook_target, Module) and entry.hook_target.state is not ModuleState.TUNED
    ]
