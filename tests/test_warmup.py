"""Warming up until the run time is steady, on a fake clock: the workload's calls take scripted times."""

import torch
from torch import nn

import aitune.torch as ait
from aitune.analysis.statistics import MAX_EXTRA_WARMUPS
from aitune.torch.performance import capture


class ScriptedClock:
    """``perf_counter_ns`` that only moves when the workload calls `spend`."""

    def __init__(self) -> None:
        self.now_ns = 0

    def perf_counter_ns(self) -> int:
        return self.now_ns

    def spend(self, us: float) -> None:
        self.now_ns += int(us * 1000)


class Scripted(nn.Module):
    """Each call takes the next scripted time (µs) on the fake clock, then the last one for ever."""

    def __init__(self, clock: ScriptedClock, times_us: list[float]) -> None:
        super().__init__()
        self.clock, self.times_us, self.calls = clock, times_us, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.clock.spend(self.times_us[min(self.calls, len(self.times_us) - 1)])
        self.calls += 1
        return x


def profile_on(monkeypatch, times_us, warmup_runs=3):
    clock = ScriptedClock()
    monkeypatch.setattr(capture, "time", clock)
    return ait.profile(Scripted(clock, times_us), torch.ones(1), warmup_runs=warmup_runs, measured_runs=3).data


def test_warmups_go_on_until_the_run_time_stops_falling(monkeypatch):
    doc = profile_on(monkeypatch, [9000.0, 4000.0, 2000.0, 1500.0, 1200.0, 1000.0, 1000.0, 1000.0, 1000.0])

    assert doc["warmup"] == {
        "requested": 3,
        "performed": 9,  # the last two (1000, 1000) no faster than the two before (1000, 1000)
        "steady": True,
        "wall_times_us": [9000.0, 4000.0, 2000.0, 1500.0, 1200.0, 1000.0, 1000.0, 1000.0, 1000.0],
    }
    assert doc["capture_overhead"]["plain_wall_time_us"] == 1000.0


def test_a_workload_warm_after_its_first_call_needs_two_warm_pairs(monkeypatch):
    doc = profile_on(monkeypatch, [5000.0, 1000.0])

    assert (doc["warmup"]["performed"], doc["warmup"]["steady"]) == (5, True)


def test_warmups_are_bounded_and_say_when_they_never_got_steady(monkeypatch):
    doc = profile_on(monkeypatch, [1000.0 * 0.9**call for call in range(40)])

    assert doc["warmup"]["performed"] == 3 + MAX_EXTRA_WARMUPS
    assert doc["warmup"]["steady"] is False


def test_no_warmups_asked_for_means_none(monkeypatch):
    doc = profile_on(monkeypatch, [1000.0], warmup_runs=0)

    assert "warmup" not in doc and "capture_overhead" not in doc


def test_a_progress_display_learns_every_call_the_capture_will_make_once_warmed_up(monkeypatch):
    clock = ScriptedClock()
    monkeypatch.setattr(capture, "time", clock)
    model = Scripted(clock, [9000.0, 4000.0, 2000.0, 1500.0, 1200.0, 1000.0])
    told: list[tuple[int, int]] = []

    ait.profile(
        model, torch.ones(1), warmup_runs=3, measured_runs=3, on_warmed_up=lambda n: told.append((n, model.calls))
    )

    # six more warmups than asked for, all done when it is told; then the stamped runs' warmup, the
    # measured runs, the profiler's warmup and the operator runs: the bar's total
    assert told == [(9 + 1 + 3 + 1 + 2, 9)]
    assert model.calls == 9 + 1 + 3 + 1 + 2
