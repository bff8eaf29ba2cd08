"""A hostile corpus (tests/hostile/, made by its make_corpus.py) through every torch-free command.

Each case exits 0, 1 or 2 as documented, with one `[error]` sentence and no traceback; no escape
sequence or markup from the document reaches the output; nothing partial is left on disk.
"""

from __future__ import annotations

import gzip

import pytest
from cli_helpers import ROOT, run_cli

from aitune.errors import ProfileError
from aitune.report.io import parse_json

CORPUS = ROOT / "tests" / "hostile"
NAMED = sorted(CORPUS.glob("name-*.profile.json"))
BROKEN_PROFILES = ["deep-1000.profile.json", "schema-version-float.profile.json"]
BROKEN_TRACES = sorted(path.name for path in CORPUS.glob("*.trace.json"))


def _assert_clean(result, allowed=(0,)):
    assert result.returncode in allowed, result.stderr
    assert "Traceback" not in result.stderr
    for control in ("\x1b", "\x07", "\x00"):
        assert control not in result.stdout + result.stderr
    if result.returncode == 2:
        assert result.stderr.startswith("[error] ") and result.stderr.count("\n") == 1


@pytest.mark.parametrize("profile", NAMED, ids=lambda path: path.stem)
@pytest.mark.parametrize(
    "command",
    [["report"], ["report", "--format", "md"], ["report", "--format", "json"], ["suggest"], ["validate"]],
    ids=" ".join,
)
def test_a_hostile_name_is_shown_as_data_by_every_command(profile, command):
    result = run_cli(*command, str(profile), block_torch=True)

    _assert_clean(result)
    if command == ["report"]:
        assert "experts[gate]" in result.stdout or "experts" not in profile.name
        assert "a[/b]" in result.stdout or "markup-close" not in profile.name
        assert "[link=https://evil.example]click[/link]" in result.stdout or "link" not in profile.name
        assert "\\x1b[2J" in result.stdout or "escapes" not in profile.name


@pytest.mark.parametrize("profile", NAMED, ids=lambda path: path.stem)
def test_a_hostile_name_cannot_inject_html_or_lines_into_markdown(profile):
    result = run_cli("report", str(profile), "--format", "md", block_torch=True)

    assert "<script>" not in result.stdout
    assert not any(line.startswith("## injected") for line in result.stdout.splitlines())
    table_rows = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert all(line.endswith(" |") for line in table_rows)


@pytest.mark.parametrize("profile", NAMED, ids=lambda path: path.stem)
def test_compare_and_bundle_take_hostile_names(profile, tmp_path):
    compared = run_cli("compare", str(profile), str(profile), block_torch=True)
    bundled = run_cli("bundle", str(profile), "-o", str(tmp_path / "b.zip"), block_torch=True)

    _assert_clean(compared)
    _assert_clean(bundled)
    assert (tmp_path / "b.zip").is_file()


@pytest.mark.parametrize("name", BROKEN_PROFILES)
@pytest.mark.parametrize("command", [["report"], ["compare"], ["suggest"], ["bundle"]], ids=" ".join)
def test_a_broken_profile_is_one_sentence(name, command, tmp_path):
    extra = {"compare": [str(CORPUS / name)], "bundle": ["-o", str(tmp_path / "b.zip")]}.get(command[0], [])

    result = run_cli(*command, str(CORPUS / name), *extra, block_torch=True)

    _assert_clean(result, allowed=(2,))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", BROKEN_PROFILES)
def test_validate_names_the_problem_of_a_broken_profile(name):
    result = run_cli("validate", str(CORPUS / name), block_torch=True)

    _assert_clean(result, allowed=(1, 2))


@pytest.mark.parametrize("name", BROKEN_TRACES)
def test_a_malformed_trace_is_one_sentence_and_leaves_nothing(name, tmp_path):
    analyzed = run_cli("analyze", str(CORPUS / name), "--out", str(tmp_path / "out"), block_torch=True)
    bundled = run_cli(
        "bundle", str(NAMED[0]), "--trace", str(CORPUS / name), "-o", str(tmp_path / "b.zip"), block_torch=True
    )

    _assert_clean(analyzed, allowed=(2,))
    assert str(CORPUS / name) in analyzed.stderr
    assert not (tmp_path / "out").exists()
    _assert_clean(bundled, allowed=(0, 2))
    assert (tmp_path / "b.zip").exists() == (bundled.returncode == 0)


def test_a_gzip_that_unpacks_past_the_limit_is_refused_before_it_is_all_in_memory():
    bomb = gzip.compress(b" " * (2**20 + 1))

    with pytest.raises(ProfileError, match=r"^bomb.gz unpacks to at least 1 MB, over the 1 MB limit; "):
        parse_json(bomb, "bomb.gz", max_bytes=2**20)


def test_the_committed_corpus_is_what_the_script_makes():
    from hostile.make_corpus import corpus

    assert {name: (CORPUS / name).read_bytes() for name in corpus()} == corpus()
