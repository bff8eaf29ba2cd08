"""`history check` on real captures of this machine: 30 runs of an unchanged workload raise no alarm, a
region slowed on purpose is found and named, runs of another machine are refused with the differences.

The captures were recorded on this project's shared 2-core machine while other jobs held its load average
at 7 to 9, by `scripts/make_history_captures.py` (its docstring says why recorded, not captured by the test:
the workload waits for known wall time in each region, and a capture made as the test runs measured the
load of that minute, failing about one run in four on a busy machine). Recorded, the verdicts are the same
in every run. A workload that spins instead stretches with the machine's load itself: two test workers and
four writer processes made every run of an unchanged spinning capture 30% slower, its fastest included,
which no statistic can tell from a change in the code (the gate's rule for stretched runs is specified in
`tests/test_history_statistics.py`).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from cli_helpers import invoke_cli

from aitune.errors import HistoryError
from aitune.history.database import open_store
from aitune.history.gate import check_against_history
from aitune.history.record import RUN_TIME, record_of
from aitune.report.io import load, save
from aitune.report.model import json_form

CAPTURES = Path(__file__).resolve().parent / "data" / "history-captures"
UNCHANGED_RUNS = 30


@pytest.fixture(scope="module")
def captures():
    """30 captures of the unchanged pipeline (10 ms encoder, 5 ms glue, 30 ms denoiser) and one, recorded at
    their middle, whose denoiser takes 50% longer (45 ms). The unchanged ones come back shuffled, with a fixed
    seed, so that a load that rose while they were recorded is spread over the history as over a real one's days.
    Each as JSON data: what a history stores, and what the tests below edit."""
    unchanged = [json_form(load(path)) for path in sorted(CAPTURES.glob("unchanged-*.profile.json.gz"))]
    assert len(unchanged) == UNCHANGED_RUNS
    random.Random(0).shuffle(unchanged)
    return unchanged, json_form(load(CAPTURES / "slower.profile.json.gz"))


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
