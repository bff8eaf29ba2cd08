"""Fixtures for tuning tests: wrappers that close themselves, and small test backends (real modules, no mocks)."""

from __future__ import annotations

import errno
import time
from typing import Any

import pytest
import torch
import torch.utils._pytree as pytree
from torch import nn

import aitune.torch as ait
from aitune.torch.backends import Backend, BuildContext, Built


@pytest.fixture
def wrapped():
    """``wrapped(module, **options)`` makes an ``aitune.torch.Module`` that is closed after the test."""
    made: list[ait.Module] = []

    def make(module: nn.Module, **options: Any) -> ait.Module:
        wrapper = ait.Module(module, **options)
        made.append(wrapper)
        return wrapper

    yield make
    for wrapper in made:
        wrapper.close()


def tiny_mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).eval()


class OffByBackend(Backend):
    """Finite but wrong: adds ``offset`` to every output (AITune's NaN/shape check would accept it)."""

    name = "off_by"

    def __init__(self, offset: float = 1e-2) -> None:
        self.offset = offset

    def build(self, context: BuildContext) -> Built:
        forward, offset = context.forward, self.offset
        return Built(run=lambda *a, **k: pytree.tree_map_only(torch.Tensor, lambda t: t + offset, forward(*a, **k)))


class BrokenBuildBackend(Backend):
    name = "broken_build"

    def build(self, context: BuildContext) -> Built:
        raise RuntimeError("no kernel for this operator")


class BrokenRunBackend(Backend):
    name = "broken_run"

    def build(self, context: BuildContext) -> Built:
        def run(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("device lost")

        return Built(run=run)


class DiskFullBackend(Backend):
    """Fails its build as a full disk does, wrapped in another error as exporters do."""

    name = "disk_full"

    def build(self, context: BuildContext) -> Built:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as error:
            raise RuntimeError("export failed") from error


class BreakableBackend(Backend):
    """Correct until ``broken`` is set: a backend failing in production after it passed tuning."""

    name = "breakable"
    broken = False

    def build(self, context: BuildContext) -> Built:
        forward = context.forward

        def run(*args: Any, **kwargs: Any) -> Any:
            if self.broken:
                raise RuntimeError("engine evicted")
            return forward(*args, **kwargs)

        return Built(run=run)


class SlowLinear(nn.Linear):
    """A linear layer whose forward waits ``delay_s``: eager is slow, a backend skipping the wait is fast."""

    def __init__(self, delay_s: float = 0.002) -> None:
        torch.manual_seed(0)
        super().__init__(8, 4)
        self.delay_s = delay_s

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(self.delay_s)
        return super().forward(x)


class DirectLinearBackend(Backend):
    """The same math as ``SlowLinear`` without the wait."""

    name = "direct_linear"

    def build(self, context: BuildContext) -> Built:
        module = context.module
        return Built(run=lambda x: torch.nn.functional.linear(x, module.weight, module.bias))


# At most 6 rounds: the fewest that give a paired speedup its 95% interval (fewer leave every candidate undecided).
FAST_MEASURE = ait.MeasureConfig(warmup=1, min_repeats=3, max_repeats=6, max_seconds=0.2)


def eager_strategy() -> ait.OneBackendStrategy:
    """Tune with the eager backend alone, measured briefly: the cheapest real tuning."""
    return ait.OneBackendStrategy(ait.EagerBackend(), measure=FAST_MEASURE)


def onnxruntime_encoder(pipe: Any) -> Any:
    """The loop app's ``encoder`` wrapped and tuned on ONNX Runtime (first-wins: it wins by passing the
    gate), as a plan's `TunedRegion`; the caller unwraps ``pipe``'s ``encoder`` when done."""
    import loop_app

    from aitune.torch.tuning.plan_write import TunedRegion
    from aitune.torch.tuning.strategies import named_strategy

    wrappers = ait.wrap(pipe, ["encoder"])
    ait.tune(
        pipe, [loop_app.x], modules=list(wrappers.values()), strategy=named_strategy("first-wins", ["onnxruntime"])
    )
    wrapper = wrappers["encoder"]
    return TunedRegion("encoder", "aot", wrapper.module, wrapper.to_dict(), wrapper.outcome)
