"""Bad input gets one `[error]` sentence on stderr and exit code 2 — never a traceback of aitune."""

import gzip
import json

import pytest
from cli_helpers import APPS, ROOT, invoke_cli, run_cli


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory, entry_capture):
    folder = tmp_path_factory.mktemp("bad")
    out, _ = entry_capture
    (folder / "bad.json").write_text("{oops")
    (folder / "notprof.json").write_text('{"a": 1}')
    future = json.loads((out / "profile.json").read_text())
    future["schema_version"] = 99
    (folder / "future.json").write_text(json.dumps(future))
    trace = (out / "trace.json.gz").read_bytes()
    (folder / "truncated.json.gz").write_bytes(trace[: len(trace) // 2])
    (folder / "plain.json.gz").write_bytes(gzip.compress(b'{"traceEvents": []}'))
    return folder


CASES = {
    "missing file": (["report", "nosuch.json"], "nosuch.json: no such file; check the path."),
    "missing script": (["capture", "nosuch.py"], "nosuch.py: no such file; check the path."),
    "no such function": (
        ["capture", "examples/pipeline_app.py:nosuch"],
        "examples/pipeline_app.py has no global named 'nosuch' to use as the function (it defines: infer).",
    ),
    "no such input": (
        ["capture", "examples/pipeline_app.py:infer", "--input", "nosuch"],
        "examples/pipeline_app.py has no global named 'nosuch' to use as the input (it defines: input_data, pipe).",
    ),
    "non-JSON file": (
        ["report", "{bad}/bad.json"],
        "{bad}/bad.json: not valid JSON (unexpected character, expected a string key: line 1 column 2 (char 1)).",
    ),
    "JSON that is not a profile": (
        ["compare", "{bad}/notprof.json", "{bad}/notprof.json"],
        "{bad}/notprof.json: not a profile document (no schema_version and runs keys).",
    ),
    "future schema_version": (
        ["validate", "{bad}/future.json"],
        "{bad}/future.json: schema_version 99 is newer than this aitune reads (1); upgrade aitune.",
    ),
    "truncated gzip": (
        ["analyze", "{bad}/truncated.json.gz"],
        "{bad}/truncated.json.gz: the gzip data is truncated or corrupt; copy the file again.",
    ),
    "trace without run markers": (
        ["analyze", "{bad}/plain.json.gz"],
        "{bad}/plain.json.gz: no ProfilerStep#N or aitune run spans in this trace; record it with "
        "torch.profiler.profile(schedule=...) and call prof.step() after each iteration, or capture it with "
        "`aitune-profile capture`.",
    ),
    "unknown report format": (
        ["report", "{bad}/future.json", "--format", "xml"],
        "unknown --format 'xml'; choose md, text, json or html.",
    ),
    "zero measured runs": (
        ["capture", "examples/pipeline_app.py:infer", "--runs", "0"],
        "--warmup must be at least 0 and --runs at least 1 (got --warmup 3, --runs 0).",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_sentence_and_exit_code_2(case, bad_files):
    args, message = CASES[case]

    # In this process: the sentence and the exit code are under test here; other tests run each command for real.
    result = invoke_cli(*(arg.format(bad=bad_files) for arg in args), cwd=ROOT)

    assert (result.returncode, result.stderr, result.stdout) == (2, f"[error] {message.format(bad=bad_files)}\n", "")


@pytest.mark.torch
def test_a_failing_script_shows_its_own_traceback_then_one_error_line():
    result = run_cli("capture", "tests/apps/raiser.py", cwd=ROOT)

    assert result.returncode == 2
    *traceback, last = result.stderr.splitlines()
    assert last == "[error] tests/apps/raiser.py raised ValueError: the script failed on purpose"
    assert traceback[0] == "Traceback (most recent call last):"
    assert 'raise ValueError("the script failed on purpose")' in result.stderr
    assert "aitune/" not in result.stderr  # the user's frames only


@pytest.mark.torch
def test_a_failing_entry_function_is_reported_as_the_users_failure():
    result = run_cli("capture", f"{APPS / 'raiser.py'}:fail", "--warmup", "0", "--runs", "1")

    assert result.returncode == 2
    assert (
        result.stderr.splitlines()[-1]
        == f"[error] {APPS / 'raiser.py'}:fail raised ValueError: the script failed on purpose"
    )
    assert "in fail" in result.stderr


def test_debug_shows_the_traceback():
    result = run_cli("report", "nosuch.json", "--debug")

    assert result.returncode == 2
    assert "Traceback (most recent call last):" in result.stderr
    assert result.stderr.endswith("[error] nosuch.json: no such file; check the path.\n")
