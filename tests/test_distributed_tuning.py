"""Tuning under torchrun: real gloo ranks of a tensor-parallel toy decide one plan together (`tests/apps/tp_tune.py`).

Rank 1 sleeps inside ``blocks.0.up``: the ``direct`` backend is faster there for that rank only, so a rank
deciding alone would disagree with the others; the job, judged by its slowest rank, tunes it on every rank.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_helpers import APPS, ROOT

from aitune.compare.loop_report import read_loop_report
from aitune.compare.ranks import rank_figures, rank_lines
from aitune.errors import ProfileError, TuningError
from aitune.torch.tuning.plan_apply import check_world_size
from aitune.torch.tuning.plan_check import load_plan
from aitune.viewer import overview
from aitune.viewer.store import ProfileStore

APP = APPS / "tp_tune.py"
EXAMPLE = ROOT / "examples" / "tensor_parallel_app.py"
TIMEOUT_S = 20  # AITUNE_DISTRIBUTED_TIMEOUT_S for these jobs: a lost rank must end the others within it
SLOW = {"AITUNE_EXAMPLE_SLOW_RANK": "1", "AITUNE_EXAMPLE_SLOW_MS": "20"}  # far beyond a loaded machine's noise


def torchrun(ranks: int, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """``torchrun --nproc-per-node ranks args...`` on a free port, the worktree first on the path, one thread each."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = os.pathsep.join(filter(None, (str(ROOT), str(APPS), str(EXAMPLE.parent), os.environ.get("PYTHONPATH"))))
    child_env = {
        **os.environ,
        "PYTHONPATH": path,
        "OMP_NUM_THREADS": "1",
        "AITUNE_DISTRIBUTED_TIMEOUT_S": str(TIMEOUT_S),
    }
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        child_env.pop(name, None)
    launcher = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={ranks}", f"--master-port={port}"]
    return subprocess.run([*launcher, *args], capture_output=True, text=True, env={**child_env, **env}, timeout=300)


def tune_job(out: Path, ranks: int, env: dict[str, str], plan: Path | None = None) -> tuple[list[dict], float, str]:
    """``torchrun --nproc-per-node ranks tp_tune.py out [plan]``: what each rank wrote (rank order), the wall time
    and the launcher's output."""
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    done = torchrun(ranks, [str(APP), str(out), *([str(plan)] if plan else [])], env)
    written = [json.loads(path.read_text()) for path in sorted(out.glob("rank*.json"))]
    return written, time.monotonic() - start, done.stdout + done.stderr


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], Path]:
    out = tmp_path_factory.mktemp("two")
    written, _, log = tune_job(out, 2, SLOW)
    assert len(written) == 2, log
    plan = out / "plan.json"  # its regions left out: they name the app's own backend, which plans cannot
    plan.write_text(json.dumps({**written[0]["plan"], "regions": []}))
    return written, plan


def _tuned_the_straggler_s_region_alike(written: list[dict], world_size: int) -> None:
    assert all("error" not in rank for rank in written), [rank.get("error") for rank in written]
    # one decision: every rank suggested, tuned and planned the same
    assert all(rank["tuned"] == written[0]["tuned"] for rank in written)
    assert all(rank["suggested"] == written[0]["suggested"] for rank in written)
    assert "blocks.0.up" in written[0]["tuned"]  # it wins for the job, though only rank 1 is faster with it
    plans = [{key: value for key, value in rank["plan"].items() if key != "created_at"} for rank in written]
    assert all(plan["regions"] == plans[0]["regions"] for plan in plans)
    # the job's figure is each step's slowest rank's; the straggler and its region are named
    figures = written[0]["ranks"]
    assert figures["world_size"] == world_size == written[0]["plan"]["distributed"]["world_size"]
    assert all(figures["job"]["before_us"] >= row["before_us"] for row in figures["ranks"])
    assert all(figures["job"]["after_us"] >= row["after_us"] for row in figures["ranks"])
    assert figures["job"]["speedup"] > 1
    assert any(message.startswith("rank 1 ") and "blocks.0.up" in message for message in figures["stragglers"])
    # the trial timed the job: its eager figure is the slowest rank's, far above the other ranks' own
    (up,) = [module for module in written[0]["tuning"]["modules"] if module["name"] == "blocks.0.up"]
    candidate = up["graphs"][0]["candidates"][0]
    assert candidate["status"] == "winner"
    assert candidate["eager_latency_median_us"] > 10 * candidate["latency_median_us"]
    assert written[0]["comparison"]["ranks"] == figures


def test_two_ranks_tune_the_straggler_s_region_with_one_plan(two_ranks):
    written, _ = two_ranks

    _tuned_the_straggler_s_region_alike(written, 2)


def test_four_ranks_refuse_a_two_rank_plan_then_tune_alike(two_ranks, tmp_path):
    _, plan = two_ranks

    replayed, _, log = tune_job(tmp_path / "replay", 4, SLOW, plan)
    written, _, log = tune_job(tmp_path / "tune", 4, SLOW)

    assert len(replayed) == 4, log
    assert all("tuned for 2 ranks but this job runs 4 ranks" in rank["error"] for rank in replayed)
    _tuned_the_straggler_s_region_alike(written, 4)


def test_a_rank_whose_gate_rejects_rejects_the_backend_for_all(tmp_path):
    written, _, log = tune_job(tmp_path, 2, {**SLOW, "AITUNE_TEST_WRONG_RANK": "0"})

    assert len(written) == 2, log
    for rank in written:
        assert rank["tuned"] == {}
        candidates = [c for m in rank["tuning"]["modules"] for g in m["graphs"] for c in g["candidates"]]
        rejected = [c for c in candidates if c["backend"] == "direct" and c["status"] == "rejected"]
        assert rejected and rejected[0]["reason"].startswith("rank 0: outside tolerance")


def test_a_rank_killed_mid_tuning_ends_the_others_within_the_timeout(tmp_path):
    written, seconds, _ = tune_job(tmp_path, 2, {**SLOW, "AITUNE_TEST_KILL_RANK": "1"})

    assert seconds < TIMEOUT_S + 60  # start-up and imports, then no wait beyond the timeout
    # rank 0 ends with one sentence: its collective lost rank 1, or torchrun's SIGTERM stopped it first
    (survivor,) = written
    assert survivor["rank"] == 0
    assert "rank 0 stopped tuning" in survivor["error"] or "launcher stopped rank 0 (SIGTERM)" in survivor["error"]


def test_tune_on_the_command_line_writes_one_job_folder_that_the_viewer_reads(tmp_path):
    out = tmp_path / "tp"
    args = ["-m", "aitune.cli", "tune", f"{EXAMPLE}:infer", "--targets", "blocks.0.up,blocks.1.up"]
    args += ["--backends", "onnxruntime", "--warmup", "1", "--runs", "5", "--no-trace", "--out", str(out)]

    done = torchrun(2, args, SLOW)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "the job (2 ranks, each step as long as its slowest rank" in done.stdout
    # one plan, rank 0's, in the job's folder; each rank's own files in its folder
    assert load_plan(out / "plan.json")["distributed"]["world_size"] == 2
    assert not list(out.glob("rank*/plan.json"))
    assert all((out / f"rank{rank}" / "after" / "profile.json").is_file() for rank in (0, 1))
    # the job's before and after are the ranks' merged captures: the viewer's ranks page shows every rank
    store = ProfileStore(runs_dir=out)
    assert store.open_names("before/profile.json", "after/profile.json"), store.problem
    assert store.has_ranks()
    assert sorted(set(zip(store.rank_table()["side"], store.rank_table()["rank"], strict=True))) == [
        ("after", 0), ("after", 1), ("before", 0), ("before", 1),
    ]  # fmt: skip
    report = store.tune_report()
    assert report.ranks == json.loads((out / "compare.json").read_text())["ranks"]
    assert "rank 1: " in overview.tuned_line(report) and "the job (2 ranks" in overview.tuned_line(report)


def test_a_compare_report_s_ranks_are_checked_when_read():
    figures = rank_figures([[10.0], [20.0]], [[5.0], [8.0]])
    report = {
        "domain": "cpu",
        "tuned_regions": [],
        "speedup": {"value": 2.5, "ci_low": 2.0, "ci_high": 3.0},
        "captures_speedup": {"value": 2.5, "ci_low": 2.0, "ci_high": 3.0},
    }

    assert read_loop_report({**report, "ranks": figures}, "compare.json").ranks == {**figures, "stragglers": []}
    assert read_loop_report(report, "compare.json").ranks is None
    broken = {**figures, "job": {"before_us": "fast", "after_us": 1.0, "speedup": 1.0}}
    with pytest.raises(ProfileError, match=r"ranks\.job\.before_us: 'fast' is not of type 'number'"):
        read_loop_report({**report, "ranks": broken}, "compare.json")


def test_a_plan_replayed_at_another_world_size_is_refused_before_anything(two_ranks):
    _, plan = two_ranks
    checked = load_plan(plan)

    with pytest.raises(TuningError, match=r"tuned for 2 ranks but this job runs one process; replay it under"):
        check_world_size(checked, 1)
    check_world_size(checked, 2)
    check_world_size({"regions": []}, 1)  # an old plan, without the field, is one process's


def test_the_job_s_figure_is_each_step_s_slowest_rank():
    figures = rank_figures([[10.0, 30.0, 10.0], [20.0, 20.0, 20.0]], [[5.0, 5.0, 5.0], [8.0, 9.0, 8.0]])

    assert figures["job"] == {"before_us": 20.0, "after_us": 8.0, "speedup": 2.5}
    assert [row["speedup"] for row in figures["ranks"]] == [2.0, 2.5]
    assert figures["slowest_rank"] == 1
    assert rank_lines(figures)[-1].startswith("the job (2 ranks, each step as long as its slowest rank")
    assert rank_lines(None) == []
