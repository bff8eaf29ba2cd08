"""Rank folders, attachments and output folders from a stranger (tests/hostile/ranks/, made by make_rank_corpus.py).

Every read is bounded (regular files only, gzip and value counts capped, nothing from a file sizes an
allocation), every write stays where it was meant (no link followed, output folders left as they were
when a command fails or is stopped), region nesting in a trace is bounded, and the viewer shows names
as the terminal does. Each CLI case asserts the exit code, one sentence, nothing left on disk, and,
where size is the attack, the peak memory of the process.
"""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import time
import tracemalloc

import pytest
from builders import region, run, trace
from cli_helpers import APPS, ROOT, cli_command
from hostile.make_rank_corpus import RANKS, corpus, plant

from aitune.cli.outputs import LOCK_NAME, output_folder
from aitune.errors import CaptureError, OutputError, ProfileError
from aitune.report import build_profile, dumps
from aitune.report.io import read_json, read_regular, read_trace_file_events, write_atomic
from aitune.report.safe_text import html_text, shown_name

PEAK_MB = 400
"""Most memory (RSS) a refused attack may take, the interpreter and aitune's imports included: before the
bounds, these cases took 2.7 GB (a gzip bomb), 6.5 GB (10⁷ events) and 21.7 GB (world_size 10¹²)."""

# The peak is the process's own high-water mark (VmHWM): Linux carries ru_maxrss over from the parent at
# fork, so in a suite whose pytest process holds 800 MB of torch every child reported at least that.
_MEASURED = (
    "import os, sys; sys.modules['torch'] = None\n"
    "from aitune.cli import main\n"
    "try:\n    main()\n"
    "finally:\n"
    "    status = open('/proc/self/status').read().split('VmHWM:')[1].split()[0]\n"
    "    with open(os.environ['AITUNE_PEAK_FILE'], 'w') as out:\n"
    "        out.write(status)\n"
)


def run_measured(tmp_path, *args: str, timeout: float = 120):
    """``aitune-profile args`` without torch, in a subprocess; (result, peak RSS in MB)."""
    peak = tmp_path / "peak.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "160", "NO_COLOR": "1", "AITUNE_PEAK_FILE": str(peak)}
    result = subprocess.run(
        [sys.executable, "-c", _MEASURED, *args], capture_output=True, text=True, env=env, timeout=timeout, cwd=tmp_path
    )
    megabytes = int(peak.read_text()) / 1024
    peak.unlink()
    return result, megabytes


def _one_sentence(result, code: int = 2) -> str:
    assert result.returncode == code, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("[error] ") and result.stderr.count("\n") == 1, result.stderr
    return result.stderr


def _tree(folder) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


def test_the_committed_rank_corpus_is_what_the_script_makes():
    made = corpus()
    assert {name: (RANKS / name).read_bytes() for name in made} == made


RANK_CASES = {
    "world-size-huge": "rank2/profile.json is missing",
    "rank-outside-the-world": "rank7/profile.json is outside the world",
    "rank-in-the-wrong-folder": "both say distributed.rank 0",
    "padded-rank-folder": "not a rank folder",
    "gzip-bomb-rank": "refused as a likely gzip bomb",
}


@pytest.mark.parametrize("case", RANK_CASES)
def test_a_hostile_rank_folder_is_one_sentence_in_bounded_memory_and_writes_nothing(case, tmp_path):
    before = _tree(RANKS / case)

    result, peak_mb = run_measured(tmp_path, "merge", str(RANKS / case), "--out", str(tmp_path / "out"))

    assert RANK_CASES[case] in _one_sentence(result)
    assert peak_mb < PEAK_MB
    assert not (tmp_path / "out").exists() and _tree(RANKS / case) == before


@pytest.mark.parametrize("case", ["fifo-rank", "dev-zero-rank", "dev-urandom-rank"])
def test_a_rank_profile_that_is_no_regular_file_is_refused_before_it_is_opened(case, tmp_path):
    folder = plant(tmp_path / "corpus")[case]

    result, peak_mb = run_measured(tmp_path, "merge", str(folder), timeout=60)

    sentence = _one_sentence(result)
    assert "not a regular file; copy the data into a file" in sentence
    assert ("FIFO" in sentence) == (case == "fifo-rank") and peak_mb < PEAK_MB
    assert not (folder / "merged").exists()


def test_a_small_file_costs_its_size_to_read_not_the_limit(tmp_path):
    small = tmp_path / "small.json"
    small.write_bytes(b'{"a": 1}')
    tracemalloc.start()

    data = read_regular(small, max_bytes=1 << 30)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()

    assert data == b'{"a": 1}'
    assert peak < 1 << 16  # a read of the whole 1 GiB limit allocated it all, then truncated


def test_report_of_a_fifo_does_not_hang(tmp_path):
    os.mkfifo(tmp_path / "profile.json")

    result, _ = run_measured(tmp_path, "report", str(tmp_path / "profile.json"), timeout=60)

    assert "is a FIFO (named pipe), not a regular file" in _one_sentence(result)


@pytest.mark.parametrize("case", ["merged-world-size-lie", "merged-step-rank-outside"])
def test_a_merged_profile_whose_ranks_disagree_is_one_sentence(case, tmp_path):
    result, peak_mb = run_measured(tmp_path, "report", "--format", "md", str(RANKS / case / "profile.json"))

    assert "merge the rank folders again." in _one_sentence(result) and peak_mb < PEAK_MB


def test_a_small_gzip_of_ten_million_events_is_refused_in_bounded_memory(tmp_path):
    trace_file = RANKS / "trace-of-ten-million-events" / "trace.json.gz"

    result, peak_mb = run_measured(tmp_path, "analyze", str(trace_file), "--out", str(tmp_path / "out"))

    assert "refused as a likely gzip bomb" in _one_sentence(result)
    assert peak_mb < PEAK_MB and not (tmp_path / "out").exists()


def test_a_plain_trace_of_more_events_than_the_limit_is_refused_by_count_before_they_are_built(tmp_path):
    path = tmp_path / "many.trace.json"
    path.write_bytes(b'{"traceEvents": [' + b"{}," * 4_000_001 + b"{}]}")

    with pytest.raises(ProfileError, match=r"many.trace.json holds up to 4,000,003 objects .* over the limit of "):
        read_trace_file_events(path)


def test_a_plain_array_of_more_values_than_the_limit_is_refused_before_it_is_parsed(tmp_path):
    path = tmp_path / "wide.json"
    path.write_bytes(b"[" + b"0," * 10_000_001 + b"0]")

    with pytest.raises(ProfileError, match=r"^\S+wide.json holds up to 10,000,002 JSON values, over the limit"):
        read_json(path)


# --- depth of meaning: region nesting in a trace ---


@pytest.mark.parametrize("depth", [140, 250])
def test_a_trace_whose_annotations_nest_hundreds_deep_is_one_sentence(depth, tmp_path):
    events = [run(0, 0, 10_000)] + [region(f"untuned_module:m{i}", 1 + i, 9_000 - i) for i in range(depth)]
    path = tmp_path / "deep.trace.json"
    path.write_bytes(dumps(trace(*events)))

    for command in (["analyze", str(path), "--out", str(tmp_path / "out")], ["analyze", str(path), "--json"]):
        result, _ = run_measured(tmp_path, *command)
        assert "region spans nest more than 24 deep" in _one_sentence(result)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["deep.trace.json"]


def test_regions_nested_to_the_bound_still_make_a_profile():
    events = [run(0, 0, 10_000)] + [region(f"untuned_module:m{i}", 1 + i, 9_000 - i) for i in range(24)]

    doc = build_profile(trace(*events))

    assert doc["runs"][0]["regions"][0]["region_id"] == "untuned_module:m0"


# --- every write stays where it was meant ---


def test_links_planted_at_temporary_names_change_nothing_outside_the_output_folder(tmp_path):
    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    out.mkdir()
    victim.write_text("keep")
    for name in ("profile.json", "profile.md"):  # the names the writer used to pick: .partial-<pid>-<name>
        for pid in {os.getpid(), os.getppid(), *range(os.getpid() - 3, os.getpid() + 4)}:
            (out / f".partial-{pid}-{name}").symlink_to(victim)

    write_atomic(out / "profile.json", b"new")

    assert victim.read_text() == "keep" and (out / "profile.json").read_bytes() == b"new"
    assert not (out / "profile.json").is_symlink()
    assert not [path for path in out.iterdir() if path.name.startswith(".partial-") and not path.is_symlink()]


def test_every_writer_refuses_to_replace_a_pipe_and_leaves_it_as_it_was(tmp_path):
    pipe = tmp_path / "bundle.json"
    os.mkfifo(pipe)

    with pytest.raises(OutputError, match="is not a regular file"):
        write_atomic(pipe, b"{}")

    assert stat.S_ISFIFO(pipe.stat().st_mode)
    assert [path.name for path in tmp_path.iterdir()] == ["bundle.json"]  # no temporary folder left


def test_merge_into_a_folder_full_of_planted_links_writes_only_its_files(tmp_path):
    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    out.mkdir()
    victim.write_text("keep")
    (out / "trap").symlink_to(victim)
    rank_folder = tmp_path / "ranks"
    for name, data in corpus().items():
        if name.startswith("rank-outside-the-world/rank0"):
            for rank in (0, 1):
                path = rank_folder / f"rank{rank}" / "profile.json"
                path.parent.mkdir(parents=True)
                path.write_bytes(data.replace(b'"rank": 0,', f'"rank": {rank},'.encode()))

    result, _ = run_measured(tmp_path, "merge", str(rank_folder), "--out", str(out))

    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "keep"
    assert sorted(path.name for path in out.iterdir()) == ["profile.json", "profile.md", "trap"]


def test_an_output_folder_that_is_a_link_is_refused(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out").symlink_to(tmp_path / "elsewhere", target_is_directory=True)

    with (
        pytest.raises(OutputError, match="out is a link; pass a real folder as the output"),
        output_folder(tmp_path / "out", exclusive=True),
    ):
        pass

    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_a_failure_in_an_existing_empty_folder_leaves_it_empty(tmp_path):
    with pytest.raises(RuntimeError), output_folder(tmp_path, exclusive=True):
        (tmp_path / "before").mkdir()
        (tmp_path / "after").mkdir()
        (tmp_path / "before" / "trace.json.gz").write_bytes(b"x")
        raise RuntimeError

    assert list(tmp_path.iterdir()) == []
    with output_folder(tmp_path, exclusive=True):  # the next run is not told "already holds a profile"
        pass


def test_a_lock_lost_to_another_process_removes_nothing_of_the_winners(tmp_path):
    folder = tmp_path / "new" / "out"
    with output_folder(folder, exclusive=True):
        (folder / "profile.json").write_text("{}")
        with (
            pytest.raises(CaptureError, match=f"process {os.getpid()}\\); wait for it"),
            output_folder(folder, exclusive=True),
        ):
            pass
        assert (folder / LOCK_NAME).exists() and (folder / "profile.json").exists()


def test_a_stale_lock_of_a_killed_process_is_named_with_the_fix(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()

    (tmp_path / LOCK_NAME).write_text(f"{dead.pid} {socket.gethostname()}\n")

    with (
        pytest.raises(CaptureError, match=f"holds a stale lock of process {dead.pid}, which no longer runs"),
        output_folder(tmp_path, exclusive=True),
    ):
        pass


_RACE = (
    "import sys, time; from pathlib import Path; from aitune.cli.outputs import output_folder\n"
    "time.sleep(max(0.0, float(sys.argv[2]) - time.time()))\n"
    "try:\n"
    "    with output_folder(Path(sys.argv[1]), exclusive=True):\n"
    "        (Path(sys.argv[1]) / 'profile.json').write_text('{}'); time.sleep(0.5)\n"
    "    print('won')\n"
    "except Exception as error:\n"
    "    print('lost', type(error).__name__)\n"
)


def test_processes_racing_for_one_new_folder_leave_the_winners_folder(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for attempt in range(3):
        folder = tmp_path / f"race{attempt}" / "out"
        start = f"{time.time() + 3:.3f}"
        racers = [
            subprocess.Popen(
                [sys.executable, "-c", _RACE, str(folder), start], stdout=subprocess.PIPE, text=True, env=env
            )
            for _ in range(4)
        ]
        outcomes = [racer.communicate(timeout=120)[0].strip() for racer in racers]
        assert outcomes.count("won") >= 1, outcomes
        assert (folder / "profile.json").exists(), outcomes
        assert not (folder / LOCK_NAME).exists()


def test_sigterm_during_capture_leaves_no_lock_and_no_folder(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [*cli_command(), "capture", f"{APPS / 'busy_app.py'}:infer", "--input", "x", "--runs", "200"]
    capture = subprocess.Popen(
        [*command, "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    deadline = time.monotonic() + 240
    while not (out / LOCK_NAME).exists() and capture.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (out / LOCK_NAME).exists(), capture.communicate()[1][-2000:] if capture.poll() is not None else "no lock"
    time.sleep(1.0)  # into the user's code

    capture.send_signal(signal.SIGTERM)
    _, stderr = capture.communicate(timeout=120)

    assert capture.returncode == 128 + signal.SIGTERM, stderr[-2000:]
    assert stderr.strip().splitlines()[-1].startswith("[error] stopped by SIGTERM")
    assert list(tmp_path.iterdir()) == []


# --- the viewer shows names as the terminal does ---

BIDI_NAME = "\u202egpj.exe"
LONG_NAME = "x" * 5000


def test_the_viewer_spells_out_bidi_controls_and_cuts_long_names_in_html_and_tables():
    assert html_text(f"<b>{BIDI_NAME}</b>") == "&lt;b&gt;\\u202egpj.exe&lt;/b&gt;"
    assert "\u202e" not in shown_name(BIDI_NAME) and len(shown_name(LONG_NAME)) < 100
    assert shown_name(LONG_NAME) != shown_name(LONG_NAME + "y")  # two long names stay two labels


def test_the_viewers_tabs_show_a_bidi_and_a_5000_character_region_name_safely():
    from documents import pipeline_doc

    from aitune.viewer import targets, views
    from aitune.viewer.selection import Selection
    from aitune.viewer.sources import Loaded
    from aitune.viewer.store import ProfileStore

    doc = dumps(pipeline_doc(1000.0, extra_region=f"untuned_module:{BIDI_NAME}")).replace(b"unet", LONG_NAME.encode())
    import orjson

    store = ProfileStore(before=Loaded("p.json", orjson.loads(doc)))
    selection = Selection()
    shown = []
    for view in (targets.TuningTargets, views.RegionShares):
        root = view(store=store, selection=selection)._render().get_root()
        for model in root.references():
            for attribute in ("text", "source", "value"):
                value = getattr(model, attribute, None)
                shown.append(repr(value.data if hasattr(value, "data") else value))
            if hasattr(model, "factors"):
                shown.append(repr(model.factors))
    page = " ".join(shown)
    assert "\u202e" not in page and "\\\\u202egpj.exe" in page
    assert LONG_NAME not in page and shown_name(LONG_NAME) in page
