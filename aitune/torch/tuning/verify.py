"""The torch side of end-to-end verification: switch tuned regions off and on, time whole runs, put losers back.

`aitune.compare.verification` decides (pure, over timings); this adapter only times ``function(input)``
with a chosen set of regions running their tuned backends and the others their original forward
(an AOT wrapper's `Module.original_forward`, a JIT-patched module's forward uninstalled for the
run), then puts back every region that did not win: its wrapper removed or its JIT patch detached.
Every region runs tuned again after each timed run, whatever happened.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from typing import Any

import torch

from aitune.compare.verification import Verification, VerifyConfig, verify_regions
from aitune.torch.performance.inputs import normalize_input
from aitune.torch.tuning.collective import job_clock, job_measure
from aitune.torch.tuning.wrapper import Module


@dataclass(frozen=True)
class Switch:
    """How to run one tuned region's original code for a while, and how to put it back for good."""

    original: Callable[[], AbstractContextManager[None]]
    put_back: Callable[[], None]


def aot_switch(wrapper: Module, put_back: Callable[[], None]) -> Switch:
    """An AOT wrapper's switch; ``put_back`` removes it from its parent (``aitune.torch.unwrap``)."""
    return Switch(wrapper.original_forward, put_back)


def verify_tuned(
    function: Callable[..., Any],
    input_data: Any,
    switches: Mapping[str, Switch],
    config: VerifyConfig | None = None,
    *,
    deadline: float | None = None,
    tick: Callable[[], None] = lambda: None,
) -> Verification:
    """Weigh the tuned regions of ``switches`` end to end on ``function(input_data)`` and put back the losers.

    ``deadline`` is a `time.monotonic` value (see `aitune.compare.verification.verify_regions`); ``tick`` is
    called after every timed run (a progress bar).
    """
    calls = config.cycle if config is not None else 1
    # Under torchrun every rank goes on with the slowest rank's times, so all keep and put back the same regions.
    measure = job_measure(_timer(function, input_data, switches, tick, calls))
    verification = verify_regions(list(switches), measure, config, deadline, job_clock(time.monotonic, deadline))
    for path in verification.put_back:
        switches[path].put_back()
    return verification


def _timer(
    function: Callable[..., Any],
    input_data: Any,
    switches: Mapping[str, Switch],
    tick: Callable[[], None],
    calls: int = 1,
) -> Callable[[frozenset[str]], list[float]]:
    """``measure(enabled)``: ``calls`` consecutive calls of the workload (one cycle of its differing calls), each
    timed alone, with exactly ``enabled`` tuned."""
    args, kwargs = normalize_input(input_data)
    synchronize = torch.cuda.synchronize if torch.cuda.is_available() and torch.cuda.is_initialized() else _nothing

    def run(enabled: frozenset[str]) -> list[float]:
        times = []
        with ExitStack() as stack:
            for path, switch in switches.items():
                if path not in enabled:
                    stack.enter_context(switch.original())
            for _ in range(calls):
                synchronize()
                start = time.perf_counter()
                function(*args, **kwargs)
                synchronize()
                times.append((time.perf_counter() - start) * 1e6)
        tick()
        return times

    return run


def _nothing() -> None:
    return None
