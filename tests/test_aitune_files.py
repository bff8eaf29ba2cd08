"""NVIDIA AITune 0.6.0's own files (tests/data/aitune-0.6.0/) load, validate, render, compare, bundle and view.

They were written by AITune's ``aitune.torch.profile`` on this project's examples/pipeline_app.py
(2 warmups, 3 measured runs), so they also line up with our own captures of that app.
"""

import gzip
import io
import json
import shutil
import zipfile
from pathlib import Path

import msgspec
import pytest
from cli_helpers import ROOT, invoke_cli

from aitune.report import build_profile, load, operator_rows, read_trace, render_markdown, validate
from aitune.report.bundle import Redactor, build_bundle
from aitune.report.model import json_form
from aitune.viewer.store import ProfileStore

DATA = Path("tests") / "data" / "aitune-0.6.0"
PROFILE = DATA / "aitune-0.6.0-pipeline.profile.json"
TRACE = DATA / "aitune-0.6.0-pipeline.trace.json.gz"
MARKER_ROWS = [
    "ProfilerStep*",
    "aitune.performance.profiled_run",
    "aitune.performance.untuned_module:unet",
    "aitune.performance.untuned_module:vae.decode",
    "aitune.performance.untuned_module:text_encoder",
]
"""The rows of AITune's operator table that are its run and region spans, not operators."""


def aitune_profile() -> dict:
    """The profile as JSON data, as `load` reads it (the record's JSON form): what the tests below edit."""
    return json_form(load(ROOT / PROFILE))


def aitune_trace() -> dict:
    return read_trace(ROOT / TRACE)


def test_load_keeps_the_document_as_aitune_wrote_it():
    assert aitune_profile() == json.loads((ROOT / PROFILE).read_text())


def test_validate_says_it_is_a_valid_aitune_profile():
    result = invoke_cli("validate", str(PROFILE), cwd=ROOT)

    assert (result.returncode, result.stdout) == (0, f"{PROFILE}: valid AITune 0.6.0 profile (schema_version 1).\n")


def test_its_operator_rows_are_its_operators_with_their_values_untouched():
    saved = aitune_profile()["profiler"]["key_averages"]["cpu_time_total"]["events"]

    rows = msgspec.to_builtins(operator_rows(aitune_profile()))

    assert [row["key"] for row in saved if row not in rows] == MARKER_ROWS
    assert rows == [row for row in saved if row["key"] not in MARKER_ROWS]


def test_a_wrong_operator_table_is_one_short_line_per_problem():
    doc = aitune_profile()
    doc["profiler"]["key_averages"]["cpu_time_total"]["events"][2]["count"] = -1
    doc["runs"][0]["regions"] = {"rows": doc["profiler"]["key_averages"]["cpu_time_total"]["events"]}

    problems = validate(doc)

    assert problems == [
        "profiler.key_averages.cpu_time_total.events[2].count: -1 is less than the minimum of 0",
        "runs[0].regions: {'rows': [{'key': 'ProfilerStep*', 'cou… is not of type 'array'",
    ]


def test_validate_prints_each_problem_on_one_line_and_exits_1(tmp_path):
    doc = aitune_profile()
    doc["profiler"]["key_averages"]["cpu_time_total"]["events"][2]["count"] = -1
    doc["runs"][1]["regions"] = {"rows": doc["profiler"]["key_averages"]["cpu_time_total"]["events"]}
    broken = tmp_path / "a-profile-whose-name-is-long-enough-to-need-the-whole-line.json"
    broken.write_text(json.dumps(doc))

    result = invoke_cli("validate", str(broken))

    assert result.returncode == 1
    assert result.stdout.splitlines() == [*(f"{broken}: {problem}" for problem in validate(doc)), "2 problem(s)."]


def test_markdown_shows_its_runs_regions_and_operators():
    markdown = render_markdown(aitune_profile())

    assert "- aitune version: 0.6.0" in markdown
    assert "| 0 | untuned_module:unet | 4 | 37.681 | 68.3% | - | - |" in markdown
    assert "| aten::mkldnn_convolution | CPU | 102 | 124.387 | 124.729 | - | - |" in markdown
    assert not any(f"| {key} |" in markdown for key in MARKER_ROWS)


def test_report_renders_it_in_every_format():
    results = {fmt: invoke_cli("report", str(PROFILE), "--format", fmt, cwd=ROOT) for fmt in ("md", "json", "text")}

    assert [result.returncode for result in results.values()] == [0, 0, 0]
    assert results["md"].stdout == render_markdown(aitune_profile())
    assert json.loads(results["json"].stdout) == aitune_profile()
    assert "untuned_module:unet" in results["text"].stdout and "(residual)" in results["text"].stdout
    assert "aitune 0.6.0" in results["text"].stdout


def test_reanalysing_its_trace_gives_its_own_runs_and_regions():
    saved = aitune_profile()

    doc = build_profile(aitune_trace())

    assert doc["profiler"]["trace_kind"] == "aitune-0.6"
    assert validate(doc) == []  # the runs' fractions add up among the invariants
    assert [region["id"] for region in doc["regions"]] == [region["id"] for region in saved["regions"]]
    for ours, theirs in zip(doc["runs"], saved["runs"], strict=True):
        assert ours["timing"]["cpu_time_us"] == pytest.approx(theirs["timing"]["cpu_time_us"])
        assert [(r["region_id"], r["calls"]) for r in ours["regions"]] == [
            (r["region_id"], r["calls"]) for r in theirs["regions"]
        ]
        assert [r["cpu_time_us"] for r in ours["regions"]] == pytest.approx(
            [r["cpu_time_us"] for r in theirs["regions"]]
        )
        assert ours["residual"]["cpu_time_us"] == pytest.approx(theirs["residual"]["cpu_time_us"])


def test_compare_lines_its_regions_up_with_our_capture_of_the_same_app(entry_capture):
    out, captured = entry_capture
    assert captured.returncode == 0, captured.stderr

    result = invoke_cli("compare", str(PROFILE), str(out / "profile.json"), "--json", cwd=ROOT)

    diff = json.loads(result.stdout)
    status = {row["path"]: row["status"] for row in diff["regions"]}
    assert result.returncode == 0, result.stderr
    assert [status[path] for path in ("text_encoder", "unet", "vae.decode")] == ["both"] * 3
    operators = {row["key"]: row for row in diff["operators"]}
    assert not set(operators) & set(MARKER_ROWS)
    assert operators["aten::mkldnn_convolution"]["before_us"] == pytest.approx(124386.699 / 3)


def test_the_bundle_holds_its_profile_markdown_and_redacted_trace():
    archive = build_bundle(aitune_profile(), aitune_trace(), redactor=Redactor(hosts=("vm",)))

    with zipfile.ZipFile(io.BytesIO(archive)) as bundle:
        names = sorted(bundle.namelist())
        profile = json.loads(bundle.read("profile.json"))
        markdown = bundle.read("profile.md").decode()
        trace = json.loads(gzip.decompress(bundle.read("trace.json.gz")))

    assert names == ["README.txt", "environment.json", "profile.json", "profile.md", "trace.json.gz"]
    assert profile == aitune_profile()
    assert markdown == render_markdown(aitune_profile())
    assert trace["host_name"] == "<host>"


def test_the_viewer_store_shows_its_regions_and_operators(tmp_path):
    shutil.copy(ROOT / PROFILE, tmp_path / "aitune.json")
    store = ProfileStore(runs_dir=tmp_path)

    opened = store.open_names("aitune.json")

    assert opened, store.problem
    regions = store.region_table("cpu")
    assert regions["path"].tolist() == ["text_encoder", "unet", "vae.decode", "(residual)"]
    assert regions["calls"].tolist() == [1, 4, 1, 0]
    operators = store.operator_table()
    assert operators["key"].tolist()[:3] == ["aten::conv2d", "aten::convolution", "aten::_convolution"]
    assert not set(operators["key"]) & set(MARKER_ROWS)


def test_the_viewer_timeline_reads_its_trace_after_analyze(tmp_path):
    shutil.copy(ROOT / TRACE, tmp_path / "trace.json.gz")
    result = invoke_cli("analyze", str(tmp_path / "trace.json.gz"), "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    store = ProfileStore(runs_dir=tmp_path)
    store.open_names("profile.json")

    timeline = store.timeline("before", 0)

    assert timeline["lane"].tolist() == ["text_encoder", "unet", "unet", "unet", "unet", "vae.decode"]
    assert timeline["duration_ms"].sum() == pytest.approx(53.805761)  # Σ region spans of run 0 in the trace
