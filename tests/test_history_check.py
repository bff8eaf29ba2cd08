"""`history check` on real captures of this machine: 30 runs of an unchanged workload raise no alarm, a
region slowed on purpose is found and named, runs of another machine are refused with the differences.

The workload waits for known wall time in each region, as a region bound by a device or by I/O does, so
what changes between its captures is this machine's scheduling (a woken thread's latency) and the capture's
own overhead. A workload that spins instead stretches with the machine's load itself: two test workers
and four writer processes on this 2-core machine made every run of an unchanged spinning capture 30%
slower, its fastest included, which no statistic can tell from a change in the code (the gate's rule
for stretched runs is specified in `tests/test_history_statistics.py`).
"""

from __future__ import annotations

import json
import random
import time

import pytest
import torch
from cli_helpers import invoke_cli
from run_locks import HEAVY_HISTORY_TESTS, one_at_a_time
from torch import nn

import aitune.torch as ait
from aitune.errors import HistoryError
from aitune.history.database import open_store
from aitune.history.gate import check_against_history
from aitune.history.record import RUN_TIME, record_of
from aitune.report.io import save

pytestmark = pytest.mark.slow  # 31 captures of about half a second each

UNCHANGED_RUNS = 30
LITE = {"warmup_runs": 1, "measured_runs": 7, "mode": "lite"}


class Waiting(nn.Module):
    """Waits ``ms`` milliseconds, then applies a small real linear layer."""

    def __init__(self, ms: float) -> None:
        super().__init__()
        self.ms = ms
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(self.ms / 1000)
        return self.linear(x)


class SmallPipeline:
    """10 ms encoder, 5 ms of glue, 30 ms denoiser."""

    def __init__(self, denoiser_ms: float = 30.0) -> None:
        torch.manual_seed(0)
        self.encoder = Waiting(10)
        self.denoiser = Waiting(denoiser_ms)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x = self.encoder(x)
        time.sleep(0.005)
        return self.denoiser(x)


def capture(pipeline: SmallPipeline) -> dict:
    return ait.profile(pipeline, torch.ones(1, 4), obj_name="pipe", **LITE).data


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    """30 captures of the unchanged pipeline and, interleaved at their middle, one whose denoiser takes 50%
    longer (45 ms): drift of the machine's load during the fixture then reaches both, as a benchmark
    interleaves its sides. The unchanged ones come back shuffled, with a fixed seed, so that a load that
    rose during the fixture is spread over the history as it is over a real one's days."""
    with one_at_a_time(tmp_path_factory, HEAVY_HISTORY_TESTS):  # never beside the concurrent writers
        unchanged = [capture(SmallPipeline()) for _ in range(UNCHANGED_RUNS // 2)]
        slower = capture(SmallPipeline(denoiser_ms=45.0))
        unchanged += [capture(SmallPipeline()) for _ in range(UNCHANGED_RUNS - len(unchanged))]
    random.Random(0).shuffle(unchanged)
    return unchanged, slower


def test_thirty_runs_of_an_unchanged_workload_raise_no_alarm(captures, tmp_path):
    unchanged, _ = captures
    alarms = []

    with open_store(tmp_path / "history.db") as store:
        for document in unchanged:
            result = check_against_history(store, document)
            alarms += [(len(result.baseline), verdict) for verdict in result.regressed]
            store.add(result.record, document)

    assert alarms == []


def test_a_region_slowed_on_purpose_is_found_and_named(captures, tmp_path):
    unchanged, slower = captures
    with open_store(tmp_path / "history.db") as store:
        for document in unchanged[-20:]:
            store.add(record_of(document), document)

        result = check_against_history(store, slower)

    assert len(result.baseline) == 20
    assert {verdict.path for verdict in result.regressed} - {RUN_TIME} == {"denoiser"}
    denoiser = next(verdict for verdict in result.regressed if verdict.path == "denoiser")
    assert denoiser.ratio == pytest.approx(1.5, rel=0.15)
    assert denoiser.p_value < 0.002


def test_the_gate_exits_1_naming_the_region_and_0_for_an_unchanged_run(captures, tmp_path):
    unchanged, slower = captures
    db = str(tmp_path / "history.db")
    files = [save(document, tmp_path / f"run{index}.json") for index, document in enumerate(unchanged[:10])]
    invoke_cli("history", "add", *map(str, files[:-1]), "--db", db)
    save(slower, tmp_path / "slower.json")

    passed = invoke_cli("history", "check", str(files[-1]), "--db", db)
    failed = invoke_cli("history", "check", str(tmp_path / "slower.json"), "--db", db, "--json")

    assert passed.returncode == 0, passed.stderr
    assert "REGRESSED" not in passed.stdout
    assert failed.returncode == 1, failed.stderr
    assert set(json.loads(failed.stdout)["regressed"]) - {RUN_TIME} == {"denoiser"}


def test_runs_of_another_machine_are_refused_with_what_differs(captures, tmp_path):
    document, other = captures[0][:2]
    elsewhere = {**other, "environment": {**other["environment"], "torch": "2.11.0+cu128", "cpu_count": 16}}
    with open_store(tmp_path / "history.db") as store:
        store.add(record_of(elsewhere), elsewhere)

        with pytest.raises(HistoryError) as refused:
            check_against_history(store, document)
        across = check_against_history(store, document, any_machine=True)

    here = document["environment"]
    assert str(refused.value) == (
        f"the stored runs of this workload are from another machine kind (cpu_count {here['cpu_count']} vs 16; "
        f"torch {here['torch']} vs 2.11.0+cu128); pass --any-machine to compare across them."
    )
    assert len(across.baseline) == 1


def test_the_baseline_can_be_one_branch(captures, tmp_path):
    unchanged, _ = captures
    rng = random.Random(0)
    with open_store(tmp_path / "history.db") as store:
        for document in unchanged[:6]:
            store.add(record_of(document, branch=rng.choice(["main", "feature"])), document)

        on_main = check_against_history(store, unchanged[6], branch="main")

    assert {stored.record.branch for stored in on_main.baseline} == {"main"}
