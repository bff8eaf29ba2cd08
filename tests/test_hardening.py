"""Hostile input and failing disks: every string is data, every read is bounded, every write is whole or absent."""

from __future__ import annotations

import copy
import gzip
import io
import os
import subprocess
import sys
import zipfile

import orjson
import pytest
from builders import decoder_trace, op, trace
from cli_helpers import APPS, ROOT, run_cli
from rich.console import Console

from aitune.analysis import read_trace_events
from aitune.cli.outputs import LOCK_NAME, output_folder
from aitune.errors import CaptureError, OutputError, ProfileError
from aitune.markers import REGION_KINDS, parse_region_id, region_kind, region_path
from aitune.report import build_profile, dumps, render_markdown, validate
from aitune.report.builder import region_meta
from aitune.report.bundle import Redactor, bundle_entries
from aitune.report.io import MAX_JSON_DEPTH, parse_json, write_atomic
from aitune.report.safe_text import markdown_text, terminal_text, visible
from aitune.report.samples import path_of

SAMPLE = ROOT / "sample_traces" / "tuned-pipeline" / "before" / "profile.json"


# --- strings from a document are data ---


def test_control_characters_are_spelled_out():
    assert visible("a\x1b[2Jb\x07\n\u202e") == "a\\x1b[2Jb\\x07\\n\\u202e"


@pytest.mark.parametrize("name", ["a[/b]", "[link=https://evil.example]click[/link]", "experts[gate]", "[bold]x"])
def test_rich_shows_markup_in_a_name_as_written(name):
    console = Console(file=io.StringIO(), width=200, force_terminal=True, color_system=None)

    console.print(terminal_text(name))

    assert console.file.getvalue() == name + "\n"


def test_a_markdown_cell_holds_no_html_pipe_link_or_line_break():
    # The newline is spelled \n, and its backslash escaped so that Markdown shows it.
    assert markdown_text("<b>x</b> | [a](http://e) \n# h") == r"&lt;b&gt;x&lt;/b&gt; \| \[a\](http://e) \\n# h"


def test_a_name_with_a_newline_stays_in_its_table_row():
    doc = build_profile(decoder_trace())
    doc["regions"][0]["name"] = "x\n## injected | <i>"

    markdown = render_markdown(doc)

    assert "\n## injected" not in markdown and "<i>" not in markdown
    assert r"x\\n## injected \| &lt;i&gt;" in markdown


def test_piped_output_keeps_a_long_row_on_one_line(tmp_path):
    doc = orjson.loads(SAMPLE.read_bytes())
    long_name = "blocks." + "very_long_module_name." * 5 + "end"
    doc["warnings"] = [{"code": "LONG", "source": "test", "message": long_name}]
    (tmp_path / "p.json").write_bytes(dumps(doc))
    env = {key: value for key, value in os.environ.items() if key != "COLUMNS"}

    result = subprocess.run(
        [sys.executable, "-m", "aitune.cli", "report", str(tmp_path / "p.json")],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(ROOT)},
        check=True,
    )

    assert any(long_name in line for line in result.stdout.splitlines())


# --- every read is bounded, every malformed event one sentence ---


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (5, r"traceEvents\[1\] is malformed \(an event must be an object, not int\)"),
        ({"ph": "X", "name": "a", "ts": "soon"}, r"traceEvents\[1\] is malformed \('ts' is str 'soon'\)"),
        ({"ph": "X", "name": ["a"], "ts": 1}, r"traceEvents\[1\] is malformed \('name' is list"),
        ({"ph": "X", "name": "a", "ts": 1, "args": "zz"}, r"\('args' is str 'zz'\)"),
        ({"ph": "X", "name": "a", "cat": "kernel", "ts": 1, "args": {"correlation": "x"}}, "correlation must be"),
        ({"ph": "X", "name": "a", "cat": "cpu_op", "ts": 1, "pid": [1]}, "'pid' or 'tid' is a list"),
    ],
)
def test_a_malformed_event_is_one_sentence_naming_it(event, message):
    with pytest.raises(ProfileError, match=message):
        read_trace_events(trace(op("aten::mm", 0, 1), event))


@pytest.mark.parametrize(
    ("metadata", "key"), [([1], "is list"), ({"regions": 5}, "'regions'"), ({"config": "x"}, "'config'")]
)
def test_metadata_of_the_wrong_type_is_one_sentence(metadata, key):
    with pytest.raises(ProfileError, match=key):
        read_trace_events({"traceEvents": [], "aitune": metadata})


def test_json_nested_past_the_bound_is_refused_and_below_it_read():
    inside = MAX_JSON_DEPTH - 1

    nested: list = []
    for _ in range(inside - 1):
        nested = [nested]
    assert parse_json(b"[" * inside + b"]" * inside, "ok.json") == nested
    with pytest.raises(ProfileError, match=f"^deep.json: JSON nested deeper than {MAX_JSON_DEPTH} levels"):
        parse_json(b"[" * 1000 + b"]" * 1000, "deep.json")


def test_a_folder_given_as_a_profile_gets_the_fix(tmp_path):
    result = run_cli("report", str(tmp_path), block_torch=True)

    assert result.stderr == f"[error] {tmp_path} is a folder; name the profile.json (or trace) inside it.\n"


def test_schema_version_one_point_zero_is_not_one():
    doc = orjson.loads(SAMPLE.read_bytes())
    doc["schema_version"] = 1.0

    assert validate(doc) == ["schema_version: 1.0 is not of type 'integer'"]


# --- writes are whole or absent; failures leave nothing behind ---


def test_a_folder_where_the_file_should_go_is_one_sentence(tmp_path):
    (tmp_path / "profile.md").mkdir()

    with pytest.raises(OutputError, match=r"profile.md \(Is a directory\); a folder is in the way"):
        write_atomic(tmp_path / "profile.md", b"text")

    assert sorted(path.name for path in tmp_path.iterdir()) == ["profile.md"]


def test_a_full_disk_keeps_the_old_file_and_leaves_no_partial_one(tmp_path):
    target = tmp_path / "profile.json"
    target.write_bytes(b"old")
    code = (
        "import resource, signal; from aitune.report.io import write_atomic; from aitune.errors import OutputError\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN); resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))\n"
        f"try: write_atomic({str(target)!r}, b'x' * 5000)\n"
        "except OutputError as error: print(error)"
    )

    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )

    assert "(File too large); the file is over this process's size limit" in result.stdout
    assert target.read_bytes() == b"old"
    assert [path.name for path in tmp_path.iterdir()] == ["profile.json"]


def test_a_failed_block_removes_the_folders_it_made(tmp_path):
    with pytest.raises(RuntimeError), output_folder(tmp_path / "foo" / "bar"):
        (tmp_path / "foo" / "bar" / "profile.json").write_text("{}")
        raise RuntimeError

    assert list(tmp_path.iterdir()) == []


def test_an_exclusive_folder_refuses_a_finished_capture_and_a_running_one(tmp_path):
    (tmp_path / "done").mkdir()
    (tmp_path / "done" / "profile.json").write_text("{}")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / LOCK_NAME).write_text("")

    with pytest.raises(CaptureError, match="already holds a profile"), output_folder(tmp_path / "done", exclusive=True):
        pass
    with (
        pytest.raises(CaptureError, match="being written by another capture"),
        output_folder(tmp_path / "busy", exclusive=True),
    ):
        pass

    assert (tmp_path / "busy" / LOCK_NAME).exists()  # the other capture's lock is left alone
    assert sorted(path.name for path in (tmp_path / "done").iterdir()) == ["profile.json"]


def test_analyze_into_a_blocked_folder_is_one_sentence_and_leaves_no_folder(tmp_path):
    (tmp_path / "file").write_text("")

    result = run_cli("analyze", str(SAMPLE.with_name("trace.json.gz")), "--out", str(tmp_path / "file" / "x"))

    assert result.returncode == 2 and result.stderr.startswith("[error] cannot create the output folder")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["file"]


def test_bundle_refuses_to_overwrite_its_own_input(tmp_path):
    profile = tmp_path / "p.json"
    profile.write_bytes(SAMPLE.read_bytes())

    result = run_cli("bundle", str(profile), "-o", str(profile), block_torch=True)

    assert result.stderr.startswith(f"[error] -o {profile} would replace the input {profile}; name another output")
    assert profile.read_bytes() == SAMPLE.read_bytes()


def test_the_redactor_replaces_a_home_only_where_a_path_starts_with_it(tmp_path):
    home = str(tmp_path / "root")
    redactor = Redactor(homes=(home,))

    text = f"backup{home}/cache {home}/x {home}fs"
    assert redactor.text(text) == f"backup{home}/cache ~/x {home}fs"


def test_a_bundled_trace_keeps_only_the_file_name_of_its_trace_name():
    doc = orjson.loads(SAMPLE.read_bytes())
    raw = {**copy.deepcopy(decoder_trace()), "traceName": "/srv/runs/x/trace.json"}

    entries = bundle_entries(doc, raw, Redactor())

    assert orjson.loads(gzip.decompress(entries["trace.json.gz"]))["traceName"] == "trace.json"


def test_a_bundle_s_environment_is_the_profile_s_environment_block_byte_for_byte():
    doc = orjson.loads(SAMPLE.read_bytes())

    entries = bundle_entries(doc, None, Redactor())

    assert doc["environment"]["gain_calibration"] and entries["environment.json"] == dumps(doc["environment"])
    without = {key: value for key, value in doc.items() if key != "environment"}
    assert bundle_entries(without, None, Redactor())["environment.json"] == b"{}\n"


# --- the command line's own edges ---


@pytest.mark.parametrize("pct", ["nan", "inf", "-5"])
def test_the_gate_refuses_a_percentage_that_is_not_finite_and_positive(pct):
    result = run_cli("compare", str(SAMPLE), str(SAMPLE), f"--fail-if-slower={pct}", block_torch=True)

    assert result.returncode == 2
    assert result.stderr.startswith("[error] --fail-if-slower takes a finite percentage of at least 0")


def test_a_scenario_asked_of_a_profile_without_scenarios_says_to_drop_it():
    result = run_cli("compare", str(SAMPLE), str(SAMPLE), "--scenario", "foo", block_torch=True)

    assert result.stderr == "[error] --scenario foo: this profile has no scenarios; drop --scenario.\n"


def test_capture_without_torch_is_one_sentence():
    result = run_cli("capture", "examples/pipeline_app.py:infer", cwd=ROOT, block_torch=True)

    assert result.returncode == 2
    assert result.stderr.startswith("[error] capture needs PyTorch, which is not installed here;")


@pytest.mark.torch
def test_an_entry_function_that_exits_is_reported_and_leaves_no_folder(tmp_path):
    result = run_cli(
        "capture", f"{APPS / 'exits.py'}:infer", "--warmup", "0", "--runs", "1", "--out", str(tmp_path / "o")
    )

    assert (result.returncode, result.stderr) == (
        2,
        f"[error] {APPS / 'exits.py'}:infer called sys.exit(3); an entry function must return, not exit.\n",
    )
    assert not (tmp_path / "o").exists()


@pytest.mark.torch
def test_a_function_that_needs_an_input_it_was_not_given_gets_the_hint(tmp_path):
    result = run_cli("capture", f"{APPS / 'exits.py'}:needs_input", "--runs", "1", "--out", str(tmp_path / "o"))

    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].endswith("; it takes x: name the global holding its input with --input")


def test_the_python_api_drops_kinetos_session_lines_and_keeps_the_workloads_stderr(capfd):
    import torch

    import aitune.torch as ait

    model = torch.nn.Sequential(torch.nn.Linear(4, 4))

    def infer(x):
        sys.stderr.write("the workload's own line\n")
        return model(x)

    ait.profile(obj=model, input_data=torch.ones(1, 4), inference_function=infer, warmup_runs=0, measured_runs=1)

    err = capfd.readouterr().err
    assert "profiler_start" not in err and "profiler_stop" not in err
    assert "the workload's own line\n" in err


def test_a_bundle_zip_is_whole(tmp_path):
    result = run_cli("bundle", str(SAMPLE), "-o", str(tmp_path / "b.zip"), block_torch=True)

    assert result.returncode == 0
    assert zipfile.ZipFile(tmp_path / "b.zip").testzip() is None
    assert sorted(path.name for path in tmp_path.iterdir()) == ["b.zip"]


# --- one region vocabulary ---


@pytest.mark.parametrize(
    ("region", "kind", "path"),
    [
        ("aot_module:unet", "aot_managed_module", "unet"),
        ("aot_managed_module:unet", "aot_managed_module", "unet"),
        ("jit_module:blocks.3", "jit_managed_module", "blocks.3"),
        ("compiled_module:vae", "compiled_module", "vae"),
        ("untuned_module:vae.decode", "untuned_module", "vae.decode"),
        ("x:", "untuned_module", "x:"),
        ("encoder", "untuned_module", "encoder"),
    ],
)
def test_one_parser_names_the_kind_and_path_of_every_region_id(region, kind, path):
    parsed_kind, parsed_path = parse_region_id(region)

    assert (parsed_kind.document_kind, parsed_path) == (kind, path)
    assert region_meta(region, {})["name"] == path_of(region) == region_path(region) == path
    assert region_meta(region, {})["kind"] == kind


def test_both_spellings_of_a_kind_name_the_same_kind():
    assert region_kind("aot_module") == region_kind("aot_managed_module") == REGION_KINDS[0]
    assert region_kind("anything else") == region_kind(None) == region_kind("untuned_module")


def test_a_document_with_the_older_kind_spelling_still_validates():
    doc = orjson.loads(SAMPLE.read_bytes())
    doc["regions"][0]["kind"] = "aot_module"

    assert validate(doc) == []
