"""`aitune-profile capture` through the real console script: entry mode, script mode, and what it leaves behind."""

import json
import sys

import torch
from cli_helpers import APPS, ROOT, run_cli

from aitune.errors import UserCodeError
from aitune.report import load
from aitune.report.model import UNSET
from aitune.torch.performance.script import capture_script


def region_ids(doc, run=0):
    return [region.region_id for region in doc.runs[run].regions]


def test_entry_capture_writes_profile_markdown_and_trace(entry_capture):
    out, result = entry_capture

    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in out.iterdir()) == ["profile.json", "profile.md", "trace.json.gz"]
    doc = load(out / "profile.json")
    assert len(doc.runs) == 2
    assert region_ids(doc) == ["untuned_module:text_encoder", "untuned_module:unet", "untuned_module:vae.decode"]
    assert (doc.target.type, doc.target.root) == ("pipeline_app.Pipeline", "pipe")  # the paths start from `pipe`
    assert (out / "profile.md").read_text().startswith("# aitune performance profile")


def test_entry_capture_prints_the_summary_and_the_paths(entry_capture):
    out, result = entry_capture

    for expected in ("untuned_module:unet", "(residual)", "run time: median", f"profile:  {out / 'profile.json'}"):
        assert expected in result.stdout
    assert f"trace:    {out / 'trace.json.gz'}" in result.stdout


def test_profiler_session_lines_stay_out_of_the_output(entry_capture, script_capture):
    for _, result in (entry_capture, script_capture):
        assert "profiler_start" not in result.stderr + result.stdout
        assert "profiler_stop" not in result.stderr + result.stdout


def test_script_capture_runs_the_main_block_as_one_run_with_owned_paths(script_capture):
    out, result = script_capture

    assert result.returncode == 0, result.stderr
    assert "generated images of shape (2, 3, 128, 128)" in result.stdout  # the script's own print
    doc = load(out / "profile.json")
    assert len(doc.runs) == 1
    assert sorted(region_ids(doc)) == [
        "untuned_module:pipe.text_encoder",
        "untuned_module:pipe.unet",
        "untuned_module:pipe.vae",
    ]
    assert doc.config.capture_mode == "script"
    assert doc.target.root is UNSET  # the paths start from the script's globals
    assert "SINGLE_RUN_SCRIPT_CAPTURE" in [warning.code for warning in doc.warnings]
    assert "SINGLE_RUN_SCRIPT_CAPTURE" in (out / "profile.md").read_text()


def test_script_arguments_and_stderr_reach_the_script(tmp_path):
    result = run_cli("capture", str(APPS / "tiny_script.py"), "--out", str(tmp_path), "--", "--flag", "1")

    assert result.returncode == 0, result.stderr
    assert "script args: ['--flag', '1']" in result.stdout
    assert "to stderr from the script" in result.stderr
    assert region_ids(load(tmp_path / "profile.json")) == ["untuned_module:model", "untuned_module:Linear"]


def test_json_output_names_the_files_and_keeps_the_scripts_prints_on_stderr(tmp_path):
    result = run_cli("capture", str(APPS / "tiny_script.py"), "--out", str(tmp_path), "--no-trace", "--json")

    assert json.loads(result.stdout) == {
        "output": str(tmp_path),
        "profiles": [
            {"profile": str(tmp_path / "profile.json"), "markdown": str(tmp_path / "profile.md"), "trace": None}
        ],
    }
    assert "script args: []" in result.stderr
    assert not (tmp_path / "trace.json.gz").exists()


def test_every_profile_a_script_makes_itself_is_collected(tmp_path):
    result = run_cli("capture", str(APPS / "self_profiling.py"), "--out", str(tmp_path))

    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "profile-1.json",
        "profile-1.md",
        "profile-2.json",
        "profile-2.md",
    ]
    assert [len(load(tmp_path / f"profile-{n}.json").runs) for n in (1, 2)] == [1, 2]


def test_a_dotted_module_entry_is_imported_from_the_current_folder(tmp_path):
    result = run_cli(
        "capture",
        "tests.apps.busy_app:infer",
        "--input",
        "x",
        "--warmup",
        "0",
        "--runs",
        "1",
        "--no-trace",
        "--out",
        str(tmp_path),
        cwd=ROOT,
    )

    assert result.returncode == 0, result.stderr
    assert region_ids(load(tmp_path / "profile.json")) == ["untuned_module:encoder", "untuned_module:denoiser"]


def test_a_failing_script_leaves_nothing_patched(tmp_path):
    from torch.nn.modules import module

    argv, path = list(sys.argv), list(sys.path)

    try:
        capture_script(APPS / "raiser.py", ["--x"], trace_file=tmp_path / "trace.json.gz")
    except UserCodeError as error:
        failure = error

    assert str(failure) == f"{APPS / 'raiser.py'} raised ValueError: the script failed on purpose"
    assert 'raise ValueError("the script failed on purpose")' in failure.details
    assert (sys.argv, sys.path) == (argv, path)
    assert not module._global_forward_pre_hooks and not module._global_forward_hooks
    assert not torch.autograd.profiler._is_profiler_enabled
