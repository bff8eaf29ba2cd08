"""The bug-report bundle: what it holds, what it never holds, and the same bytes every time."""

import getpass
import gzip
import hashlib
import json
import re
import socket
import zipfile
from pathlib import Path

import pytest
from cli_helpers import run_cli

from aitune.errors import BundleError
from aitune.report import load
from aitune.report.bundle import Redactor, build_bundle
from aitune.report.model import json_form


@pytest.fixture(scope="module")
def bundles(entry_capture, tmp_path_factory):
    out, _ = entry_capture
    folder = tmp_path_factory.mktemp("bundles")
    for name in ("one.zip", "two.zip"):
        run_cli(
            "bundle",
            str(out / "profile.json"),
            "--trace",
            str(out / "trace.json.gz"),
            "-o",
            str(folder / name),
            check=True,
        )
    return folder / "one.zip", folder / "two.zip"


def members(archive: Path) -> dict[str, str]:
    """Every file of the zip as text, the trace gunzipped."""
    with zipfile.ZipFile(archive) as bundle:
        raw = {name: bundle.read(name) for name in bundle.namelist()}
    return {name: (gzip.decompress(data) if name.endswith(".gz") else data).decode() for name, data in raw.items()}


def test_the_bundle_holds_profile_markdown_environment_readme_and_trace(bundles):
    assert sorted(members(bundles[0])) == [
        "README.txt",
        "environment.json",
        "profile.json",
        "profile.md",
        "trace.json.gz",
    ]


def test_the_bundle_has_no_home_path_user_name_or_host_name(bundles):
    text = "\n".join(members(bundles[0]).values())

    assert str(Path.home()) + "/" not in text
    for name in {getpass.getuser(), socket.gethostname()}:
        assert not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text), name
    trace = json.loads(members(bundles[0])["trace.json.gz"])
    assert trace.get("host_name", "<host>") == "<host>"  # torch 2.13 writes the host's name there, 2.11 does not


def test_two_bundles_of_the_same_inputs_are_byte_identical(bundles):
    assert bundles[0].read_bytes() == bundles[1].read_bytes()


def test_redaction_covers_homes_users_and_hosts_anywhere_in_the_data(tmp_path):
    home = str(tmp_path / "ada")
    redactor = Redactor(homes=(home,), users=("ada",), hosts=("lab-7",))
    data = {
        "path": f"{home}/app.py",
        "other": "/Users/bob/x.py",
        "host_name": "anything",
        "note": "run by ada on lab-7",
    }

    assert redactor.value(data) == {
        "path": "~/app.py",
        "other": "~/x.py",
        "host_name": "<host>",
        "note": "run by <user> on <host>",
    }


def test_a_bundle_over_the_limit_is_refused_with_the_reason(entry_capture):
    doc = json_form(load(entry_capture[0] / "profile.json"))  # a bundle holds the document's JSON data
    names = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(20000)]  # barely compressible
    trace = {"traceEvents": [{"name": name, "ph": "X", "ts": 0, "dur": 1} for name in names]}

    with pytest.raises(BundleError) as refused:
        build_bundle(doc, trace, max_mb=0.1)

    assert re.fullmatch(
        r"the bundle would be \d\.\d MB, over the 0\.1 MB limit \(trace\.json\.gz is \d\.\d MB\); "
        r"bundle without --trace, or capture fewer runs, or raise --max-mb\.",
        str(refused.value),
    )
