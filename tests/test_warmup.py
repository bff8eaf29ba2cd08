"""Warming up until the run time is steady, on a fake clock: the workload's calls take scripted times."""

import torch
from torch import nn

import aitune.torch as ait
from aitune.analysis.statistics import MAX_EXTRA_WARMUPS
from aitune.report import render_markdown
from aitune.report.document import calls_note
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


def profile_on(monkeypatch, times_us, warmup_runs=3, **options):
    clock = ScriptedClock()
    monkeypatch.setattr(capture, "time", clock)
    model = Scripted(clock, times_us)
    doc = ait.profile(model, torch.ones(1), warmup_runs=warmup_runs, measured_runs=3, **options).data
    return doc, model.calls


def test_a_workload_already_warm_costs_no_call_beyond_the_warmups_runs_and_operator_runs(monkeypatch):
    doc, calls = profile_on(monkeypatch, [5000.0, 1000.0])

    assert calls == 3 + 3 + 1  # requested warmups, measured runs, the operator run (it records the shapes)
    assert (doc["warmup"]["performed"], doc["warmup"]["steady"]) == (3, True)
    assert [run["timing"]["wall_time_us"] for run in doc["runs"]] == [1000.0, 1000.0, 1000.0]
    assert doc["capture_overhead"]["plain_wall_time_us"] == 1000.0


def test_a_lite_capture_adds_only_the_warmup_that_records_input_shapes(monkeypatch):
    doc, calls = profile_on(monkeypatch, [5000.0, 1000.0], mode="lite")

    assert calls == 3 + 1 + 3
    assert doc["warmup"]["performed"] == 3


def test_measured_runs_still_falling_are_set_aside_as_warmups_and_a_plain_baseline_follows(monkeypatch):
    doc, calls = profile_on(monkeypatch, [9000.0, 4000.0, 2000.0, 1500.0, 1200.0, 1000.0])

    # runs 1500, 1200, 1000 start by falling: 1500 is set aside, then 1200; 1000 ×3 are the measured runs
    assert doc["warmup"] == {
        "requested": 3,
        "performed": 5,
        "steady": True,
        "wall_times_us": [9000.0, 4000.0, 2000.0, 1500.0, 1200.0],
        "set_aside": 2,
    }
    assert [run["timing"]["wall_time_us"] for run in doc["runs"]] == [1000.0, 1000.0, 1000.0]
    assert [run["run_index"] for run in doc["runs"]] == [0, 1, 2]
    # the warmups' 4000 and 2000 were not steady: the baseline is two plain calls after the runs
    assert (doc["capture_overhead"]["plain_wall_time_us"], doc["capture_overhead"]["ratio"]) == (1000.0, 1.0)
    assert calls == 3 + 5 + 2 + 1


def test_set_aside_runs_are_bounded_and_say_when_the_run_time_never_got_steady(monkeypatch):
    doc, _ = profile_on(monkeypatch, [1000.0 * 0.9**call for call in range(40)])

    assert doc["warmup"]["performed"] == 3 + MAX_EXTRA_WARMUPS
    assert doc["warmup"]["steady"] is False


def test_runs_under_the_profiler_still_warm_up_until_steady_before_them(monkeypatch):
    doc, _ = profile_on(monkeypatch, [9000.0, 4000.0, 2000.0, 1500.0, 1200.0, 1000.0], operator_runs="all")

    assert doc["warmup"]["wall_times_us"] == [9000.0, 4000.0, 2000.0, 1500.0, 1200.0, 1000.0, 1000.0, 1000.0, 1000.0]
    assert doc["capture_overhead"]["plain_wall_time_us"] == 1000.0


def test_no_warmups_asked_for_means_none(monkeypatch):
    doc, calls = profile_on(monkeypatch, [5000.0, 1000.0], warmup_runs=0)

    assert "warmup" not in doc and "capture_overhead" not in doc
    assert calls == 3 + 1  # the cold first run is measured, never set aside


def test_a_progress_display_learns_every_call_the_capture_will_make_and_each_it_adds(monkeypatch):
    clock = ScriptedClock()
    monkeypatch.setattr(capture, "time", clock)
    model = Scripted(clock, [9000.0, 4000.0, 2000.0, 1500.0, 1200.0, 1000.0])
    told: list[tuple[int, int]] = []

    ait.profile(
        model, torch.ones(1), warmup_runs=3, measured_runs=3, on_warmed_up=lambda n: told.append((n, model.calls))
    )

    # told after the warmups, then again as each still-falling run is set aside (the first adds the plain baseline)
    assert told == [(3 + 3 + 1, 3), (3 + 3 + 1 + 1 + 2, 6), (3 + 3 + 1 + 2 + 2, 7)]
    assert model.calls == 3 + 3 + 1 + 2 + 2


def test_the_report_says_what_every_call_beyond_the_measured_runs_was_for(monkeypatch):
    doc, _ = profile_on(monkeypatch, [9000.0, 4000.0, 2000.0, 1500.0, 1200.0, 1000.0])

    assert calls_note(doc) == (
        "3 plain warmup(s) + 2 run(s) set aside as warmups (the run time was still falling) + 3 measured run(s) + "
        "2 plain call(s) for the overhead's baseline + 1 operator run (the operator table; it records "
        "the input shapes)"
    )
    assert f"- Calls: {calls_note(doc)}" in render_markdown(doc)
