"""The whole-call breakdown (`benchmarks/capture_phases.py`, `overhead.py --breakdown`) names the phases
a capture goes through, accounts for the whole call, and leaves the capture path as it found it."""

from __future__ import annotations

import torch
from capture_phases import OTHER, phase_split

import aitune.torch as ait
from aitune.torch.performance import capture
from aitune.torch.performance import profile as profile_module


def tiny_model() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def test_a_default_capture_splits_into_its_runs_the_profiler_the_read_and_the_analysis():
    model, x = tiny_model(), torch.randn(2, 8)

    split = phase_split(lambda: ait.profile(model, x, warmup_runs=0, measured_runs=3))

    for phase in (
        "measured runs (clock-stamped)",
        "operator runs (profiler on)",
        "profiler stop (torch ends the session)",
        "reading the profiler's events",
        "analysis and document (rest)",
    ):
        assert split[phase] > 0, phase
    assert "shape-recording warm-up (lite)" not in split
    assert all(seconds >= 0 for phase, seconds in split.items() if phase != OTHER)


def test_a_lite_capture_has_no_profiler_phase_and_the_path_is_restored_after():
    model, x = tiny_model(), torch.randn(2, 8)
    originals = (capture._stamped_run, capture._timed, profile_module.profile_from_events)

    split = phase_split(lambda: ait.profile(model, x, warmup_runs=0, measured_runs=3, mode="lite"))

    assert split["shape-recording warm-up (lite)"] > 0
    assert not any(phase.startswith(("profiler", "operator runs")) for phase in split)
    assert (capture._stamped_run, capture._timed, profile_module.profile_from_events) == originals
