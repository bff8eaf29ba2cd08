"""A busy machine does not fail the suite: tests whose inputs are measured times pass beside a CPU burner.

CI shares its cores with other work, and a developer runs the suite beside a build. A representative
set of the tests that capture a real workload and judge its times (`TIMED`) runs here in a pytest
process of its own while one process per core spins: that process then gets part of a core, and a
spin in the workload overshoots its deadline whenever it is preempted at the wrong moment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.slow, pytest.mark.torch]

TIMED = (
    "tests/test_lite.py",
    "tests/test_capture.py::test_known_busy_times_are_attributed_within_three_points",
    "tests/test_tree.py::test_both_levels_of_a_block_are_attributed_and_each_level_adds_up",
    "tests/test_tree.py::test_glue_inside_generate_is_generate_self_time_which_the_headline_names",
    "tests/test_operator_runs.py::test_the_measured_runs_shares_match_the_work_the_modules_measured_themselves",
    "tests/test_compare.py::test_a_capture_compared_with_itself_passes_a_5_percent_gate",
    "tests/test_compare.py::test_a_workload_made_30_percent_slower_fails_the_5_percent_gate",
    "tests/test_loop.py::test_a_region_that_slows_the_run_is_put_back_left_out_of_the_plan_and_untuned_after",
    "tests/test_loop.py::test_of_a_win_and_a_loss_only_the_win_stays_tuned_and_goes_into_the_plan",
)
"""Tests whose verdict reads times a busy machine stretches: lite captures of busy-waiting workloads and
their shares, full captures' shares against the times each measured run's own call spun (`busy.first_measured_call`:
a full capture's last calls are its operator runs, and pairing a run with another call's times failed
these at a load of 13), the compare gate on real captures, and the loop's end-to-end check keeping a win
and putting back a loss. (Warmup and verification decisions are also tested on synthetic clocks, which no
load moves.)"""

BURNER = "while True:\n    pass\n"


def test_the_tests_that_judge_measured_times_pass_while_every_core_is_busy():
    burners = [subprocess.Popen([sys.executable, "-c", BURNER]) for _ in range(os.cpu_count() or 2)]
    try:
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TIMED],
            cwd=ROOT,
            # One torch thread, as the docs' examples run: with two OpenMP threads beside two burners, each
            # parallel region waits for a preempted thread, and the workloads are tiny.
            env={**os.environ, "OMP_NUM_THREADS": "1"},
            capture_output=True,
            text=True,
            timeout=1200,
        )
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()

    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert " failed" not in result.stdout.splitlines()[-1]
