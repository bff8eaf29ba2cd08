"""A model's buffers kept as they were found across a capture or a tuning, and what training mode did to them.

Capture and tune run the workload many times: a model left in training mode updates its BatchNorm running
statistics (and ``num_batches_tracked``) on every call and its Dropout draws a fresh mask. `KeptState` copies
every buffer on entry, notes on exit which ones the runs changed, and puts them all back bitwise, also when
the workload raised. Parameters are not copied (that would double a large model's memory): inference never
writes into them, and `KeptState` notes one whose version counter moved, so the warning can say so.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch import nn

from aitune.analysis.warnings import ProfileWarning, training_mode

_DROPOUT_NAMES = ("Dropout", "DropPath", "DropBlock", "StochasticDepth")


def named_modules(roots: Iterable[tuple[str, nn.Module]]) -> Iterator[tuple[str, nn.Module]]:
    """Every module under ``roots`` (path, module) once, by its dotted path (the first path it is reached by)."""
    seen: set[int] = set()
    for root_path, root in roots:
        for name, module in root.named_modules():
            if id(module) not in seen:
                seen.add(id(module))
                yield ".".join(filter(None, (root_path, name))), module


def draws_randomly(module: nn.Module) -> bool:
    """Whether ``module`` is a Dropout-like module in training mode with a drop probability above 0."""
    if not module.training or not any(name in type(module).__name__ for name in _DROPOUT_NAMES):
        return False
    probability = getattr(module, "p", getattr(module, "drop_prob", 1.0))
    return not isinstance(probability, (int, float)) or probability > 0


class KeptState:
    """``with KeptState(roots) as kept:`` — every buffer under ``roots`` is the same bitwise after the block.

    ``kept.changed`` (path → buffer and parameter names the block changed) and ``kept.random`` (the paths of
    Dropout-like modules in training mode) are set on exit; `warnings` words them as ``TRAINING_MODE``.
    """

    def __init__(self, roots: Iterable[tuple[str, nn.Module]]) -> None:
        self.modules = list(named_modules(roots))
        self.changed: dict[str, list[str]] = {}
        self.random: list[str] = []

    def __enter__(self) -> KeptState:
        self.random = [path for path, module in self.modules if draws_randomly(module)]
        with torch.no_grad():
            self._buffers = [
                (path, name, buffer, buffer.detach().clone())
                for path, module in self.modules
                for name, buffer in module.named_buffers(recurse=False)
                if buffer is not None
            ]
        self._versions = [
            (path, name, parameter, parameter._version)
            for path, module in self.modules
            for name, parameter in module.named_parameters(recurse=False)
        ]
        return self

    def __exit__(self, *exc: Any) -> None:
        changed: dict[str, list[str]] = {}
        with torch.no_grad():
            for path, name, buffer, copy in self._buffers:
                if buffer.shape != copy.shape or not torch.equal(buffer, copy):
                    changed.setdefault(path, []).append(name)
                    buffer.copy_(copy) if buffer.shape == copy.shape else buffer.set_(copy)
        for path, name, parameter, version in self._versions:
            if parameter._version != version:
                changed.setdefault(path, []).append(f"parameter {name} (not put back)")
        self.changed = changed
        self._buffers, self._versions = [], []

    def warnings(self) -> list[ProfileWarning]:
        """``TRAINING_MODE`` when a module in training mode changed its state or draws random numbers."""
        training = {path for path, module in self.modules if module.training}
        return training_mode(self.random, {path: names for path, names in self.changed.items() if path in training})
