"""Tuning one patched module with the AOT engine (``tune_graphs``), and what JIT adds around it.

While a module tunes, it and its patched descendants have their original forwards back (the patched
module sees to that), so backends trace and export plain modules and the reference outputs record nothing. A failure is
logged, its traceback written to the module's cache folder, and the module runs eager; a full disk
(``OSError(ENOSPC)``) is never turned into a fallback. Hooks a backend added to the module are moved
before the application's, so the application's hooks see the backend's effects.
"""

from __future__ import annotations

import logging
import traceback
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from random import Random
from typing import Any

import torch
from torch import nn

from aitune.errors import TuningError, is_out_of_disk
from aitune.markers import JIT_REGION_KIND
from aitune.torch.devices import module_device
from aitune.torch.jit.config import JitConfig
from aitune.torch.performance.regions import qualified_type
from aitune.torch.tuning.outcome import RegionOutcome
from aitune.torch.tuning.recording import Recording
from aitune.torch.tuning.report import module_entry
from aitune.torch.tuning.strategies import default_strategy
from aitune.torch.tuning.tuner import GraphRunner, TuneTarget, tune_graphs

logger = logging.getLogger(__name__)

ERROR_LOG = "tuning_error.log"


class InjectedFailure(TuningError):
    """A dry run's deliberate tuning failure (``dry_run_failure_probability``)."""


@dataclass(frozen=True)
class TuneOutcome:
    """What tuning one module gave: ``tuned`` when at least one graph has a winning backend."""

    tuned: bool
    runners: dict[str, GraphRunner]
    report: RegionOutcome
    reason: str  # which backends won, or why it runs eager


def tune_patched(
    name: str, module: nn.Module, forward: Callable[..., Any], recording: Recording, config: JitConfig, rng: Random
) -> TuneOutcome:
    """Tune the module's recorded graphs (its and its patched descendants' original forwards in place, as the
    caller sees to); never raises except for out-of-disk (and what is not an ``Exception``)."""
    hooks_before = _hook_keys(module)
    try:
        runners, report = _run(name, module, forward, recording, config, rng)
    except Exception as error:
        if is_out_of_disk(error):
            raise
        return _failed(name, module, config, error)
    finally:
        _put_new_hooks_first(module, hooks_before)
    winners = sorted({graph.winner for graph in report.graphs if graph.won})
    if winners:
        return TuneOutcome(True, runners, report, reason=f"won by {', '.join(winners)}")
    return TuneOutcome(False, runners, report, reason=_no_winner_reason(report))


def _run(
    name: str, module: nn.Module, forward: Callable[..., Any], recording: Recording, config: JitConfig, rng: Random
) -> tuple[dict[str, GraphRunner], RegionOutcome]:
    if config.dry_run and rng.random() < config.dry_run_failure_probability:
        raise InjectedFailure(
            f"dry run: failure injected with probability {config.dry_run_failure_probability:g} into {name}"
        )
    graphs = list(recording.graphs.values())
    target = TuneTarget(
        name=name,
        module=module,
        forward=forward,
        graphs=graphs,
        samples=recording.samples,
        device=torch.device(config.device) if config.device is not None else module_device(module),
        kind=JIT_REGION_KIND,
    )
    strategy = config.strategy or default_strategy()
    return tune_graphs(target, {spec.graph_id: strategy for spec in graphs}, keep=not config.dry_run)


def _failed(name: str, module: nn.Module, config: JitConfig, error: Exception) -> TuneOutcome:
    summary = f"{type(error).__name__}: {error}"
    log = write_error_log(config.cache_dir / name, error)
    logger.warning(
        "aitune: JIT tuning of '%s' failed (%s); it runs eager%s",
        name,
        summary,
        f", traceback in {log}" if log else "",
    )
    report = replace(
        module_entry(name, qualified_type(module), str(module_device(module)), [], JIT_REGION_KIND),
        error=summary,
        error_log=str(log) if log else None,
    )
    return TuneOutcome(False, {}, report, reason=summary)


def write_error_log(folder: Path, error: BaseException) -> Path | None:
    """Write the error's traceback to ``folder/tuning_error.log``; None (logged) when it cannot be written.

    A full disk is re-raised: it is the user's problem to fix, not a tuning outcome.
    """
    path = folder / ERROR_LOG
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(traceback.format_exception(type(error), error, error.__traceback__)))
    except OSError as write_error:
        if is_out_of_disk(write_error):
            raise
        logger.warning("aitune: could not write the JIT tuning error log %s (%s)", path, write_error)
        return None
    return path


def _no_winner_reason(report: RegionOutcome) -> str:
    tried = [f"{c.backend}: {c.reason}" for graph in report.graphs for c in graph.candidates]
    return "no backend won" + (f" ({'; '.join(tried)})" if tried else "")


def _hook_keys(module: nn.Module) -> tuple[set[int], set[int]]:
    return set(module._forward_pre_hooks), set(module._forward_hooks)


def _put_new_hooks_first(module: nn.Module, before: tuple[set[int], set[int]]) -> None:
    for hooks, old in zip((module._forward_pre_hooks, module._forward_hooks), before, strict=True):
        _move_new_keys_first(hooks, old)


def _move_new_keys_first(hooks: OrderedDict[int, Any], old: set[int]) -> None:
    for key in reversed([key for key in hooks if key not in old]):
        hooks.move_to_end(key, last=False)
