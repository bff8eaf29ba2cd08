"""analyze, report, validate and bundle on captures of both modes: each command once through the real console
script, its other forms in this process (`invoke_cli`), where their text and exit code are under test."""

import json

import pytest
from cli_helpers import invoke_cli, run_cli

from aitune.report import json_form, load, render_markdown


@pytest.fixture(params=["entry", "script"])
def captured(request, entry_capture, script_capture):
    out, result = entry_capture if request.param == "entry" else script_capture
    assert result.returncode == 0, result.stderr
    return out


def test_analyze_rederives_the_captured_profile_from_its_trace(captured, tmp_path):
    result = run_cli("analyze", str(captured / "trace.json.gz"), "--out", str(tmp_path))

    assert result.returncode == 0, result.stderr
    assert load(tmp_path / "profile.json") == load(captured / "profile.json")
    assert "run time: median" in result.stdout


def test_analyze_json_prints_the_document(captured):
    result = invoke_cli("analyze", str(captured / "trace.json.gz"), "--json")

    assert json.loads(result.stdout) == json_form(load(captured / "profile.json"))


def test_report_renders_markdown_json_and_text(captured):
    markdown = invoke_cli("report", str(captured / "profile.json"), "--format", "md")
    as_json = invoke_cli("report", str(captured / "profile.json"), "--format", "json")
    text = run_cli("report", str(captured / "profile.json"))

    assert markdown.stdout == render_markdown(load(captured / "profile.json")) == (captured / "profile.md").read_text()
    assert json.loads(as_json.stdout) == json.loads((captured / "profile.json").read_text())  # in the model's order
    assert "Where the time goes (cpu, median per run)" in text.stdout
    assert "(residual)" in text.stdout


def test_validate_accepts_a_capture(captured):
    result = run_cli("validate", str(captured / "profile.json"))

    assert (result.returncode, result.stdout) == (
        0,
        f"{captured / 'profile.json'}: valid profile (schema_version 1).\n",
    )


def test_validate_lists_every_problem_with_its_json_path_and_exits_1(entry_capture, tmp_path):
    doc = json.loads((entry_capture[0] / "profile.json").read_text())
    doc["runs"][0]["residual"]["cpu_time_fraction"] = -0.5
    del doc["runs"][1]["timing"]["cpu_time_us"]
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(doc))

    result = invoke_cli("validate", str(broken), "--json")

    assert result.returncode == 1
    assert json.loads(result.stdout) == {
        "path": str(broken),
        "valid": False,
        "problems": [
            "runs[0].residual.cpu_time_fraction: -0.5 is less than the minimum of 0",
            "runs[1].timing: 'cpu_time_us' is a required property",
        ],
    }


def test_the_torch_free_commands_work_without_torch(entry_capture, tmp_path):
    profile = str(entry_capture[0] / "profile.json")
    commands = [
        ["validate", profile],
        ["report", profile, "--format", "md"],
        ["compare", profile, profile],
        ["analyze", str(entry_capture[0] / "trace.json.gz")],
        ["bundle", profile, "-o", str(tmp_path / "b.zip")],
    ]

    results = [run_cli(*command, block_torch=True) for command in commands]

    assert [(result.returncode, result.stderr) for result in results] == [(0, "")] * len(commands)
