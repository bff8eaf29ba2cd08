"""Fixtures for JIT tests: real modules, cheap backends, and JIT switched off after every test."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn
from tuning.conftest import eager_strategy

from aitune.torch import jit
from aitune.torch.backends import Backend, BuildContext, Built


@pytest.fixture(autouse=True)
def jit_reset():
    """Every JIT test ends with JIT off: modules detached, interception undone, the process mode forgotten."""
    yield
    jit.reset()


def config(**options: Any) -> jit.JitConfig:
    """A JIT config tuning with the eager backend after 2 calls, unless told otherwise."""
    return jit.JitConfig(**{"tune_after": 2, "strategy": eager_strategy(), **options})


class Block(nn.Module):
    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.inner = nn.Linear(width, width)
        self.outer = nn.Linear(width, width)

    def forward(self, x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        return self.outer(torch.relu(self.inner(x))) * scale


class Net(nn.Module):
    """Two blocks in a ModuleList and a head: three levels to tune, fall back and skip in."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.ModuleList(Block() for _ in range(2))
        self.head = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def built_net(**options: Any) -> Net:
    with jit.intercept(config(**options)):
        return Net().eval()


def states(net: nn.Module) -> dict[str, str]:
    """``{fq name: state}`` of every patched module under ``net`` that has run."""
    session = jit.active_session()
    found = (session.find(module) for module in net.modules())
    return {patched.fq_name: patched.state.value for patched in found if patched is not None and patched.fq_name}


class FailsFor(Backend):
    """Eager, except that modules of the given classes fail the correctness gate (their outputs are off)."""

    name = "fails_for"

    def __init__(self, *classes: type) -> None:
        self.classes = classes

    def build(self, context: BuildContext) -> Built:
        forward, off = context.forward, isinstance(context.module, self.classes)
        return Built(run=lambda *args, **kwargs: forward(*args, **kwargs) + (1.0 if off else 0.0))


class CountingBackend(Backend):
    """Eager, counting the calls it serves: proves a call went through the tuned path."""

    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def build(self, context: BuildContext) -> Built:
        forward = context.forward

        def run(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return forward(*args, **kwargs)

        return Built(run=run)
