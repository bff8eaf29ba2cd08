"""No command writes over one of its own inputs: an output path that names an input (the same path, a link
to it, a hard link) is one sentence and exit 2, and the input keeps its bytes.

Each case is the command a user could mistype, on real files: a profile built from a trace, a trace
written by the test builders, a rank folder from the hostile corpus, a tune folder's files.
"""

from __future__ import annotations

import os
import shutil

import pytest
from builders import decoder_trace
from cli_helpers import APPS, invoke_cli, run_cli
from documents import pipeline_doc
from hostile.make_rank_corpus import RANKS

from aitune.report import dumps


def _refused(result, output, source) -> None:
    assert result.returncode == 2, result.stderr
    expected = f"[error] {output} would replace the input {source}; name another output so the input is kept.\n"
    assert result.stderr == expected


@pytest.fixture
def profile(tmp_path):
    path = tmp_path / "p.profile.json"
    path.write_bytes(dumps(pipeline_doc(1000.0)))
    return path


def _aliases(tmp_path, path):
    """``path`` itself, a symbolic link to it and a hard link to it: three names of one file."""
    link, hard = tmp_path / "link.json", tmp_path / "hard.json"
    link.symlink_to(path)
    os.link(path, hard)
    return {"same path": path, "symbolic link": link, "hard link": hard}


@pytest.mark.parametrize("name", ["same path", "symbolic link", "hard link"])
@pytest.mark.parametrize("output_format", ["md", "html", "json"])
def test_report_refuses_to_write_over_its_profile(profile, tmp_path, output_format, name):
    before = profile.read_bytes()
    output = _aliases(tmp_path, profile)[name]

    result = invoke_cli("report", str(profile), "--format", output_format, "-o", str(output))

    _refused(result, f"-o {output}", profile)
    assert profile.read_bytes() == before


@pytest.mark.parametrize("side", ["before", "after"])
def test_compare_refuses_to_write_its_html_over_either_profile(profile, tmp_path, side):
    other = tmp_path / "other.profile.json"
    other.write_bytes(dumps(pipeline_doc(800.0)))
    before_bytes, after_bytes = profile.read_bytes(), other.read_bytes()
    target = profile if side == "before" else tmp_path / "link.json"
    if side == "after":
        target.symlink_to(other)

    result = invoke_cli("compare", str(profile), str(other), "--html", str(target))

    _refused(result, f"--html {target}", profile if side == "before" else other)
    assert (profile.read_bytes(), other.read_bytes()) == (before_bytes, after_bytes)


def test_compare_of_a_tune_folder_refuses_to_write_its_html_over_the_folders_report(tmp_path):
    folder = tmp_path / "tuned"
    for side in ("before", "after"):
        (folder / side).mkdir(parents=True)
        (folder / side / "profile.json").write_bytes(dumps(pipeline_doc(1000.0)))
    (folder / "compare.json").write_text("{}")

    result = invoke_cli("compare", str(folder), "--html", str(folder / "compare.json"))

    _refused(result, f"--html {folder / 'compare.json'}", folder / "compare.json")
    assert (folder / "compare.json").read_text() == "{}"


@pytest.mark.parametrize("input_name", ["profile", "trace"])
def test_bundle_refuses_to_write_its_zip_over_the_profile_or_the_trace(profile, tmp_path, input_name):
    trace = tmp_path / "t.trace.json"
    trace.write_bytes(dumps(decoder_trace()))
    target = {"profile": profile, "trace": trace}[input_name]
    before = target.read_bytes()

    result = invoke_cli("bundle", str(profile), "--trace", str(trace), "-o", str(target))

    _refused(result, f"-o {target}", target)
    assert target.read_bytes() == before


def test_analyze_refuses_an_out_folder_where_it_would_write_over_the_trace(tmp_path):
    trace = tmp_path / "profile.json"  # a trace saved under the name analyze gives the profile it writes
    trace.write_bytes(dumps(decoder_trace()))
    before = trace.read_bytes()

    result = invoke_cli("analyze", str(trace), "--out", str(tmp_path))

    _refused(result, f"--out {trace}", trace)
    assert trace.read_bytes() == before and sorted(path.name for path in tmp_path.iterdir()) == ["profile.json"]


def test_merge_refuses_an_out_folder_where_it_would_write_over_a_ranks_profile(tmp_path):
    folder = tmp_path / "ranks"
    shutil.copytree(RANKS / "rank-outside-the-world", folder)
    rank0 = folder / "rank0" / "profile.json"
    before = rank0.read_bytes()

    result = invoke_cli("merge", str(folder), "--out", str(folder / "rank0"))

    _refused(result, f"--out {rank0}", rank0)
    assert rank0.read_bytes() == before and sorted(path.name for path in rank0.parent.iterdir()) == ["profile.json"]


def test_tune_refuses_an_out_folder_where_it_would_write_over_the_plan_it_replays(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text('{"regions": []}')

    result = run_cli("tune", f"{APPS / 'loop_app.py'}:infer", "--plan", str(plan), "--out", str(tmp_path))

    _refused(result, f"--out {plan}", plan)
    assert plan.read_text() == '{"regions": []}' and [path.name for path in tmp_path.iterdir()] == ["plan.json"]


def test_an_output_beside_the_input_is_written(profile, tmp_path):
    result = invoke_cli("report", str(profile), "--format", "md", "-o", str(tmp_path / "p.md"))

    assert result.returncode == 0, result.stderr
    assert (tmp_path / "p.md").read_text().startswith("#")
