"""The viewer reads files defensively: names stay in the runs folder, sizes and nesting are bounded."""

import gzip
import os
import shutil
from pathlib import Path

import orjson
import pytest

from aitune.errors import ProfileError
from aitune.report import io as report_io
from aitune.report import read_trace
from aitune.viewer import sources

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


def test_every_committed_sample_has_its_trace_and_the_folder_stays_small():
    for name in sources.list_profiles(SAMPLES):
        loaded = sources.load_from_folder(SAMPLES, name)
        assert loaded.trace_path is not None, name
        read_trace(loaded.trace_path)
    assert sum(path.stat().st_size for path in SAMPLES.rglob("*") if path.is_file()) < 2 * 2**20


def test_the_runs_folder_lists_profiles_and_not_traces_or_a_tune_folders_reports(tmp_path):
    (tmp_path / "run1").mkdir()
    reports = [f"run1/{name}" for name in ("suggestions.json", "tuning.json", "compare.json", "plan.json")]
    for name in ("a.profile.json", "run1/profile.json", "a.trace.json.gz", "run1/trace.json", "notes.md", *reports):
        (tmp_path / name).write_text("{}")

    assert sources.list_profiles(tmp_path) == ["a.profile.json", "run1/profile.json"]


def test_the_runs_folder_lists_history_databases_inside_it(tmp_path):
    (tmp_path / "ci").mkdir()
    (tmp_path / "outside.db").write_text("")
    for name in ("history.db", "ci/nightly.sqlite", "a.profile.json", "notes.md"):
        (tmp_path / name).write_text("")
    runs = tmp_path / "runs"
    shutil.copytree(tmp_path / "ci", runs / "ci")
    (runs / "history.db").write_text("")
    (runs / "secret.db").symlink_to(tmp_path / "outside.db")

    assert sources.list_histories(runs) == ["ci/nightly.sqlite", "history.db"]


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/passwd", "sub/../../outside.json"])
def test_a_name_that_resolves_outside_the_runs_folder_is_refused(tmp_path, name):
    (tmp_path / "sub").mkdir()

    with pytest.raises(ProfileError, match="outside the runs folder"):
        sources.resolve_inside(tmp_path / "sub", name)


def test_a_50_mb_file_is_refused_with_the_limit_named(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as stream:
        stream.truncate(50 * 2**20)

    with pytest.raises(ProfileError, match=r"big.json is 50 MB, over the viewer's 20 MB limit"):
        sources.load_from_folder(tmp_path, "big.json")


def test_a_gzip_that_unpacks_past_the_limit_is_refused():
    bomb = gzip.compress(os.urandom(sources.MAX_FILE_BYTES // 2 + 10).hex().encode(), compresslevel=1)

    with pytest.raises(ProfileError, match="unpacks to at least 20 MB"):
        sources.parse_json(bomb, "bomb.json.gz")


@pytest.mark.parametrize("depth", [100, 5000])
def test_deeply_nested_json_is_refused(depth):
    data = b'{"schema_version": 1, "runs": ' + b"[" * depth + b"]" * depth + b"}"

    with pytest.raises(ProfileError, match="nested deeper than 64 levels"):
        sources.profile_from_bytes(data, "deep.json")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"not json", r"^x.json: not valid JSON"),
        (b'{"hello": 1}', r"^x.json: not a profile document \(no schema_version and runs keys\)\.$"),
        (orjson.dumps({"schema_version": 9, "runs": []}), "schema_version 9 is newer than this aitune reads"),
        (orjson.dumps({"schema_version": 1, "runs": []}), r"^x.json: \(document\): '\w+' is a required"),
    ],
)
def test_a_bad_file_gets_one_sentence_naming_the_file(data, message):
    with pytest.raises(ProfileError, match=message):
        sources.profile_from_bytes(data, "x.json")


def test_nesting_depth_counts_containers_only():
    assert report_io.nesting_depth(1) == 0
    assert report_io.nesting_depth({"a": [1, {"b": []}]}) == 4


def test_links_that_lead_out_of_the_runs_folder_are_not_listed(tmp_path):
    runs, outside = tmp_path / "runs", tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    runs.mkdir()
    for path in (runs / "a.profile.json", outside / "secret.profile.json", outside / "sub" / "profile.json"):
        path.write_text("{}")
    (runs / "secret.profile.json").symlink_to(outside / "secret.profile.json")
    (runs / "elsewhere").symlink_to(outside / "sub", target_is_directory=True)
    (runs / "loop.profile.json").symlink_to(runs / "loop.profile.json")
    (runs / "again.profile.json").symlink_to(runs / "a.profile.json")

    assert sources.list_profiles(runs) == ["a.profile.json", "again.profile.json"]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("\x00", r"^'\\x00' cannot be a file name \(embedded null byte\); pick a profile from the list\.$"),
        ("a" * 5000, r"^'a{38}… cannot be a file name \(File name too long\); pick a profile from the list\.$"),
        ("sub/" + "x" * 300 + ".json", r"^'sub/x{34}… cannot be a file name \(File name too long\); pick a"),
        ("\ufffd\ufffd.json", r"^'\ufffd\ufffd.json' is not a file in the runs folder; pick one from the list\.$"),
    ],
    ids=["nul", "over-long", "over-long-part", "undecodable"],
)
def test_a_name_no_file_can_have_is_one_short_sentence(tmp_path, name, message):
    (tmp_path / "sub").mkdir()

    with pytest.raises(ProfileError, match=message):
        sources.load_from_folder(tmp_path, name)


def test_a_profile_that_cannot_be_read_is_one_sentence(tmp_path):
    folder = tmp_path / "a.profile.json"
    folder.mkdir()

    with pytest.raises(ProfileError, match=r"^a.profile.json is a folder; name the profile.json"):
        sources.read_bounded(folder, "a.profile.json")


def test_a_tune_folders_report_that_links_out_of_the_runs_folder_is_refused(tmp_path):
    runs, secret = tmp_path / "runs", tmp_path / "compare.json"
    (runs / "tune").mkdir(parents=True)
    secret.write_text('{"secret": 1}')
    (runs / "tune" / "compare.json").symlink_to(secret)

    with pytest.raises(ProfileError, match="outside the runs folder"):
        sources.read_tune_report(runs / "tune", runs)
