"""Capture under torch.distributed: two real gloo ranks started by torchrun, one folder and one trace per rank."""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from cli_helpers import APPS, ROOT

import aitune.torch as ait
from aitune.cli import outputs
from aitune.errors import CaptureError
from aitune.report import build_profile, read_trace, validate
from aitune.report.markdown import render_markdown
from aitune.torch.performance.distributed import (
    LaunchedRank,
    host_index,
    launched_rank,
    local_rank_of,
    rank_path,
    timeout_s,
)

EXAMPLE = ROOT / "examples" / "tensor_parallel_app.py"
BOUND_S = 60  # a failed rank must not keep the others longer than this (the default AITUNE_DISTRIBUTED_TIMEOUT_S)


def torchrun(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``torchrun --nproc-per-node 2 args...`` on a free port, the worktree first on the path, one thread per rank."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = os.pathsep.join(filter(None, (str(ROOT), str(APPS), os.environ.get("PYTHONPATH"))))
    child_env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", "COLUMNS": "160", "NO_COLOR": "1"}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        child_env.pop(name, None)
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(port)]
    return subprocess.run(
        [*launcher, *args], capture_output=True, text=True, env={**child_env, **(env or {})}, cwd=cwd, timeout=600
    )


def trace_of(folder: Path) -> dict:
    with gzip.open(folder / "trace.json.gz") as stream:
        return json.load(stream)


# --- pure rules, no processes ---


def test_the_launcher_environment_names_the_rank_only_for_more_than_one_process():
    assert launched_rank({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}) == LaunchedRank(1, 2, 1)
    assert launched_rank({"RANK": "3", "WORLD_SIZE": "4"}) == LaunchedRank(3, 4, 3)
    assert launched_rank({"RANK": "0", "WORLD_SIZE": "1"}) is None
    assert launched_rank({}) is None


def test_a_broken_launcher_environment_is_one_sentence():
    with pytest.raises(CaptureError, match=r"RANK=2 is outside WORLD_SIZE=2"):
        launched_rank({"RANK": "2", "WORLD_SIZE": "2"})
    with pytest.raises(CaptureError, match=r"is not an integer; launch with torchrun"):
        launched_rank({"RANK": "zero", "WORLD_SIZE": "2"})
    with pytest.raises(CaptureError, match=r"AITUNE_DISTRIBUTED_TIMEOUT_S='-1' is not a positive number"):
        timeout_s({"AITUNE_DISTRIBUTED_TIMEOUT_S": "-1"})


def test_a_rank_file_goes_into_its_rank_folder_once():
    assert rank_path(Path("out/trace.json.gz"), 1) == Path("out/rank1/trace.json.gz")
    assert rank_path(Path("out/rank1/trace.json.gz"), 1) == Path("out/rank1/trace.json.gz")
    assert rank_path("profile.json", 0) == Path("rank0/profile.json")


def test_hosts_are_numbered_in_sorted_order_and_local_ranks_count_the_host_s_lower_ranks():
    hosts = ["node-b", "node-b", "node-a", "node-a"]

    assert [host_index(hosts, rank) for rank in range(4)] == [1, 1, 0, 0]
    assert [local_rank_of(hosts, rank) for rank in range(4)] == [0, 1, 0, 1]


def test_a_single_process_capture_has_no_distributed_block_and_keeps_its_trace_path(tmp_path, monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4))

    prof = ait.profile(model, torch.ones(1, 4), warmup_runs=0, measured_runs=2, trace_file=tmp_path / "trace.json")
    saved = prof.save(tmp_path / "profile.json")
    ait.wait_for_traces()  # the trace is written in the background

    assert "distributed" not in prof.data
    assert all("barrier_wait_us" not in run for run in prof.data["runs"])
    assert "distributedInfo" not in json.loads((tmp_path / "trace.json").read_text())
    assert prof.trace_file == (tmp_path / "trace.json").resolve()
    assert saved == tmp_path / "profile.json"
    assert "Distributed" not in render_markdown(prof.data)


def test_each_rank_locks_its_own_folder_and_refuses_a_finished_one(tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    folders = []
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        folders.append(outputs.rank_folder(tmp_path / "out"))
    (folders[1] / "profile.json").parent.mkdir(parents=True)
    (folders[1] / "profile.json").write_text("{}")

    # rank 0 is writing: rank 1 is refused for its own finished folder, not for rank 0's lock
    with (
        outputs.output_folder(folders[0], exclusive=True),
        pytest.raises(CaptureError, match=r"rank1 already holds a profile"),
        outputs.output_folder(folders[1], exclusive=True),
    ):
        pass

    assert folders == [tmp_path / "out" / "rank0", tmp_path / "out" / "rank1"]


def test_a_rank_that_cannot_reach_the_others_is_one_sentence_and_leaves_no_group(monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    model = torch.nn.Linear(2, 2)

    with pytest.raises(CaptureError, match=r"^rank 0 could not meet the other ranks within 60 s \(.*MASTER_ADDR"):
        ait.profile(model, torch.ones(1, 2), warmup_runs=0, measured_runs=1)

    assert not torch.distributed.is_initialized()


# --- two real ranks ---


@pytest.fixture(scope="module")
def tensor_parallel_capture(tmp_path_factory):
    """``torchrun -m aitune.cli capture examples/tensor_parallel_app.py:infer`` once: its folder and result."""
    out = tmp_path_factory.mktemp("tp") / "out"
    result = torchrun(
        "-m", "aitune.cli", "capture", f"{EXAMPLE}:infer", "--warmup", "1", "--runs", "3", "--out", str(out)
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return out, result


@pytest.mark.slow
def test_each_rank_writes_its_own_files_with_its_distributed_block(tensor_parallel_capture):
    out, _ = tensor_parallel_capture

    docs = [json.loads((out / f"rank{rank}" / "profile.json").read_text()) for rank in (0, 1)]

    assert sorted(path.name for path in out.iterdir()) == ["rank0", "rank1"]
    for rank, doc in enumerate(docs):
        assert sorted(path.name for path in (out / f"rank{rank}").iterdir()) == [
            "profile.json",
            "profile.md",
            "trace.json.gz",
        ]
        assert doc["distributed"] == {
            "rank": rank,
            "world_size": 2,
            "local_rank": rank,
            "backend": "gloo",
            "host_index": 0,
        }
        assert validate(doc) == []
        assert f"- Distributed: rank {rank} of 2 (backend gloo" in (out / f"rank{rank}" / "profile.md").read_text()


@pytest.mark.slow
def test_each_rank_s_trace_says_which_rank_wrote_it(tensor_parallel_capture):
    out, _ = tensor_parallel_capture

    infos = [trace_of(out / f"rank{rank}")["distributedInfo"] for rank in (0, 1)]

    assert [(info["rank"], info["world_size"], info["backend"]) for info in infos] == [(0, 2, "gloo"), (1, 2, "gloo")]


@pytest.mark.slow
def test_every_rank_measures_the_same_runs_each_after_a_timed_barrier(tensor_parallel_capture):
    out, _ = tensor_parallel_capture

    docs = [json.loads((out / f"rank{rank}" / "profile.json").read_text()) for rank in (0, 1)]

    assert [[run["run_index"] for run in doc["runs"]] for doc in docs] == [[0, 1, 2], [0, 1, 2]]
    assert docs[0]["warmup"]["performed"] == docs[1]["warmup"]["performed"]  # the ranks agreed when to stop
    for doc in docs:
        waits = [run["barrier_wait_us"] for run in doc["runs"]]
        assert len(waits) == 3 and all(wait >= 0 for wait in waits)
        # the wait is outside the run: a run's wall time is the run span's, not the barrier's
        assert all(run["timing"]["wall_time_us"] > 0 for run in doc["runs"])


@pytest.mark.slow
def test_hta_loads_the_rank_folders_as_one_two_rank_run(tensor_parallel_capture):
    from hta.trace_analysis import TraceAnalysis

    out, _ = tensor_parallel_capture

    files = {rank: str(out / f"rank{rank}" / "trace.json.gz") for rank in (0, 1)}
    analysis = TraceAnalysis(trace_files=files, trace_dir=str(out))

    assert sorted(analysis.t.traces) == [0, 1]
    assert [analysis.t.meta_data[rank]["distributedInfo"]["rank"] for rank in (0, 1)] == [0, 1]
    assert all(len(analysis.t.traces[rank]) > 0 for rank in (0, 1))


@pytest.mark.slow
def test_a_rank_that_raises_stops_every_rank_within_the_bound_naming_it_and_leaving_no_files(tmp_path):
    """The bound is lowered to 20 s (rank 0 waits that long at the barrier for the rank that failed), and
    torchrun's own limit below (600 s) stands for "not gloo's default of 30 minutes": how long two
    interpreters take to start depends on the machine's load, so the test times nothing else."""
    out = tmp_path / "out"

    result = torchrun(
        "-m",
        "aitune.cli",
        "capture",
        f"{APPS / 'dist_app.py'}:infer",
        "--warmup",
        "1",
        "--runs",
        "3",
        "--out",
        str(out),
        env={"AITUNE_TEST_FAIL_RANK": "1", "AITUNE_TEST_FAIL_CALL": "4", "AITUNE_DISTRIBUTED_TIMEOUT_S": "20"},
    )

    assert result.returncode != 0
    assert "[error] tests/apps/dist_app.py:infer raised ValueError: rank 1 failed on purpose at call 4" in (
        result.stderr.replace(str(ROOT) + os.sep, "")
    )
    assert "); rank 0 stopped its capture too." in result.stderr
    assert "[error] rank 1 failed (the profiled workload raised ValueError" in result.stderr
    assert not out.exists() or not any(out.rglob("*"))


@pytest.mark.slow
def test_the_python_api_puts_each_rank_s_trace_and_profile_in_its_rank_folder(tmp_path):
    out = tmp_path / "api"

    result = torchrun(str(APPS / "dist_self_profiling.py"), str(out))

    assert result.returncode == 0, result.stderr[-3000:]
    for rank in (0, 1):
        doc = json.loads((out / f"rank{rank}" / "profile.json").read_text())
        assert doc["distributed"]["rank"] == rank
        assert doc["trace_file"] == "trace.json"
        assert json.loads((out / f"rank{rank}" / "trace.json").read_text())["distributedInfo"]["rank"] == rank
        assert len(doc["runs"]) == 2 and all("barrier_wait_us" in run for run in doc["runs"])
        lite = read_trace(out / f"rank{rank}" / "lite.json")
        assert lite["distributedInfo"] == {"backend": "gloo", "rank": rank, "world_size": 2}
        rederived = build_profile(lite)  # the trace alone carries the rank and the waits
        assert rederived["distributed"]["rank"] == rank
        assert [run["barrier_wait_us"] >= 0 for run in rederived["runs"]] == [True, True]


@pytest.mark.slow
def test_a_whole_script_capture_is_one_run_per_rank_without_a_barrier(tmp_path):
    out = tmp_path / "script"

    result = torchrun("-m", "aitune.cli", "capture", str(EXAMPLE), "--out", str(out))

    assert result.returncode == 0, result.stderr[-3000:]
    for rank in (0, 1):
        doc = json.loads((out / f"rank{rank}" / "profile.json").read_text())
        assert doc["distributed"]["rank"] == rank and doc["distributed"]["world_size"] == 2
        assert len(doc["runs"]) == 1 and "barrier_wait_us" not in doc["runs"][0]
        assert trace_of(out / f"rank{rank}")["distributedInfo"] == {"backend": "gloo", "rank": rank, "world_size": 2}
        assert f"rank {rank}/2: output sum" in result.stdout


@pytest.mark.slow
def test_merge_of_a_real_two_rank_run_names_the_rank_slowed_inside_one_region(tmp_path):
    # Rank 1 sleeps in blocks.0.up; rank 0 waits for it inside blocks.0.down's all_reduce, so step
    # and block times even out across ranks and only the time outside communication shows who is slow.
    out = tmp_path / "out"
    slow = {"AITUNE_EXAMPLE_SLOW_RANK": "1", "AITUNE_EXAMPLE_SLOW_MS": "20"}
    capture = ["-m", "aitune.cli", "capture", f"{EXAMPLE}:infer", "--warmup", "1", "--runs", "5", "--out", str(out)]
    result = torchrun(*capture, env=slow)
    assert result.returncode == 0, result.stderr[-3000:]

    merged = subprocess.run(
        [sys.executable, "-m", "aitune.cli", "merge", str(out), "--json"], capture_output=True, text=True, cwd=ROOT
    )

    assert merged.returncode == 0, merged.stderr[-3000:]
    doc = json.loads((out / "merged" / "profile.json").read_text())
    assert validate(doc) == []
    assert [(s["rank"], s["region_id"]) for s in doc["ranks"]["stragglers"]] == [(1, "untuned_module:blocks.0.up")]
    (warning,) = [w for w in doc["warnings"] if w["code"] == "RANK_STRAGGLER"]
    assert warning["message"].startswith("rank 1 is slower than the other ranks beyond noise: outside communication")
