"""Where a whole ``profile()`` call spends its time: each phase's own seconds (time in a nested phase is
counted once, in the inner one), by wrapping the capture path's functions for the duration of one call.

`overhead.py --breakdown` prints the split; proportions survive a loaded machine, absolute ms do not.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import torch.profiler

from aitune.analysis import attribution
from aitune.report import builder
from aitune.torch.calibration import DispatchProbe
from aitune.torch.model_state import KeptState
from aitune.torch.performance import capture, instrument
from aitune.torch.performance import profile as profile_module

OTHER = "other (inside profile(), outside every phase)"

_TIMED_CALLS = {  # `capture._timed`'s ``which``, by its first words
    "operator run": "operator runs (profiler on)",
    "plain baseline": "plain baseline runs",
    "instrumented warmup": "shape-recording warm-up (lite)",
    "memory run": "memory run",
    "profiler warmup": "profiler warm-up run",
    "warmup run": "user warm-ups",
}

# (owner, attribute, phase): module functions are looked up at call time, class methods on the type
_PHASES: list[tuple[Any, str, str]] = [
    (profile_module, "discover_targets", "regions discovered"),
    (profile_module, "profile_environment", "environment block"),
    (profile_module, "ensure_peaks", "machine peaks (cached)"),
    (KeptState, "__enter__", "model state kept and restored"),
    (KeptState, "__exit__", "model state kept and restored"),
    (capture, "wait_for_traces", "waiting for an earlier trace"),
    (instrument.Instrumented, "__enter__", "instrumenting (install, restore)"),
    (instrument.Instrumented, "__exit__", "instrumenting (install, restore)"),
    (instrument.InputShapes, "__enter__", "input shapes recorded"),
    (instrument.InputShapes, "__exit__", "input shapes recorded"),
    (capture, "_stamped_run", "measured runs (clock-stamped)"),
    (DispatchProbe, "__call__", "dispatch probe after each run"),
    (torch.profiler.profile, "__enter__", "profiler start"),
    (torch.profiler.profile, "step", "profiler steps"),
    (torch.profiler.profile, "__exit__", "profiler stop (torch ends the session)"),
    (capture, "events_from_profiler", "reading the profiler's events"),
    (capture, "read_trace_events", "reading the stamped events (lite)"),
    (capture, "memory_run", "memory run"),
    (capture, "write_later", "trace write handed to its thread"),
    (profile_module, "profile_from_events", "analysis and document (rest)"),
    (attribution, "attribute_runs", "analysis: attribution"),
    (builder, "_traced_run_docs", "analysis: operator sections"),
    (builder, "_memory", "analysis: memory section"),
]


class PhaseClock:
    """Own seconds per phase: a phase's time minus that of the phases it called."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self._children: list[float] = []  # per open phase: the seconds of the phases it called

    def timed(self, phase: str | Callable[..., str], function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            name = phase if isinstance(phase, str) else phase(*args, **kwargs)
            self._children.append(0.0)
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - start
                self.seconds[name] += elapsed - self._children.pop()
                if self._children:
                    self._children[-1] += elapsed

        return wrapper


def _timed_call_phase(call: Any, synchronize: Any, which: str, span: str | None = None) -> str:
    return next((phase for start, phase in _TIMED_CALLS.items() if which.startswith(start)), f"other run: {which}")


@contextmanager
def _patched(clock: PhaseClock) -> Iterator[None]:
    with ExitStack() as undo:
        for owner, name, phase in [*_PHASES, (capture, "_timed", _timed_call_phase)]:
            original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
            setattr(owner, name, clock.timed(phase, original))
            undo.callback(setattr, owner, name, original)
        yield


def phase_split(call: Callable[[], Any]) -> dict[str, float]:
    """Own seconds of each phase of ``call()`` (one whole ``profile()``), and `OTHER` for the rest."""
    clock = PhaseClock()
    with _patched(clock):
        start = time.perf_counter()
        call()
        whole = time.perf_counter() - start
    split = dict(clock.seconds)
    split[OTHER] = whole - sum(split.values())
    return split
