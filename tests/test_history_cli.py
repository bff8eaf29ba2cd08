"""``aitune-profile history`` as a user runs it: add, show, ledger, prune, export and import, and one sentence
(exit 2, no traceback) for a database that is not a history."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_helpers import capture_busy_app, invoke_cli
from documents import HOSTILE, pipeline_doc

from aitune.report.io import save

ROOT = Path(__file__).resolve().parent.parent
TUNE_FOLDER = ROOT / "sample_traces" / "tuned-pipeline"


def history(tmp_path: Path, *args: str):
    return invoke_cli("history", *args, "--db", str(tmp_path / "history.db"), cwd=tmp_path)


def profiles(folder: Path, unet_us: list[float]) -> list[Path]:
    """One capture folder per value, each holding a profile.json, as `capture` lays them out."""
    return [save(pipeline_doc(us), folder / f"capture{index}" / "profile.json") for index, us in enumerate(unet_us)]


def test_a_folder_of_captures_is_added_and_shown_as_sparklines(tmp_path):
    profiles(tmp_path / "captures", [100.0, 100.0, 200.0])

    added = history(tmp_path, "add", str(tmp_path / "captures"), "--commit", "abc", "--tag", "nightly")
    shown = history(tmp_path, "show")

    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("added 3 run(s) to sqlite:///")
    assert shown.returncode == 0, shown.stderr
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in shown.stdout.splitlines() if "│" in line}
    assert rows["unet"] == "▁▁█"
    assert rows["text_encoder"] == "▁▁▁"


def test_adding_many_profiles_reports_progress_in_a_log_at_each_tenth(tmp_path):
    profiles(tmp_path / "captures", [100.0 + index for index in range(20)])

    added = history(tmp_path, "add", str(tmp_path / "captures"))

    assert added.returncode == 0, added.stderr
    assert added.stderr.splitlines() == [f"adding {done}/20" for done in range(2, 21, 2)]


def test_a_tune_folder_fills_the_ledger(tmp_path):
    added = history(tmp_path, "add", str(TUNE_FOLDER))
    shown = history(tmp_path, "ledger", "--json")

    assert added.stdout.startswith("added 2 run(s)")
    ledger = json.loads(shown.stdout)
    assert [(row["backend"], row["device"], row["count"]) for row in ledger] == [("onnxruntime", "cpu", 2)]
    assert ledger[0]["kendall_tau"] == 1.0  # unet predicted and realised the larger gain, vae the smaller


def test_prune_export_and_import_through_the_command_line(tmp_path):
    profiles(tmp_path / "captures", [100.0] * 5)
    history(tmp_path, "add", str(tmp_path / "captures"))

    pruned = history(tmp_path, "prune", "--keep-last", "3")
    exported = history(tmp_path, "export", str(tmp_path / "export"))
    shutil.move(tmp_path / "history.db", tmp_path / "old.db")
    imported = history(tmp_path, "import", str(tmp_path / "export"))

    assert pruned.stdout.startswith("pruned 2 run(s)")
    assert exported.stdout.startswith("exported 3 run(s)")
    assert imported.stdout.startswith("imported 3 run(s)")


def test_a_check_with_nothing_stored_passes_and_says_so(tmp_path):
    (new,) = profiles(tmp_path, [100.0])

    checked = history(tmp_path, "check", str(new))

    assert checked.returncode == 0
    assert "no stored runs of this workload" in checked.stdout


def test_a_file_that_is_not_a_database_is_one_sentence_and_exit_2(tmp_path):
    (tmp_path / "history.db").write_text("not a database\n" * 50)

    shown = history(tmp_path, "show")

    assert shown.returncode == 2
    assert shown.stderr.count("\n") == 1
    assert shown.stderr.startswith("[error] sqlite:///") and "file is not a database" in shown.stderr
    assert "Traceback" not in shown.stderr


def test_the_history_is_found_through_the_environment(tmp_path, monkeypatch):
    profiles(tmp_path / "captures", [100.0])
    monkeypatch.setenv("AITUNE_HISTORY", str(tmp_path / "elsewhere.db"))

    invoke_cli("history", "add", str(tmp_path / "captures"), cwd=tmp_path)

    assert (tmp_path / "elsewhere.db").is_file()
    assert not (tmp_path / ".aitune").exists()


def test_prune_without_a_bound_is_refused(tmp_path):
    refused = history(tmp_path, "prune")

    assert (refused.returncode, refused.stderr) == (
        2,
        "[error] prune needs --keep-last N or --older-than DAYS (or both).\n",
    )


@pytest.mark.torch
def test_a_capture_with_history_keeps_its_profile(tmp_path):
    db = tmp_path / "history.db"

    profile = capture_busy_app(tmp_path / "capture", "--history", "--history-db", str(db))
    shown = history(tmp_path, "show")

    assert profile.is_file()
    assert shown.returncode == 0, shown.stderr
    assert ": 1 run(s) (workload" in shown.stdout


def test_the_html_report_draws_each_row_and_keeps_stored_text_as_text(tmp_path):
    for unet_us in (100.0, 150.0, 120.0):
        save(pipeline_doc(unet_us, target={"type": HOSTILE}), tmp_path / "p.json")
        history(tmp_path, "add", str(tmp_path / "p.json"))

    written = history(tmp_path, "report", "--format", "html", "-o", str(tmp_path / "trend.html"))

    page = (tmp_path / "trend.html").read_text()
    assert written.returncode == 0, written.stderr
    assert "<script" not in page and "<img" not in page
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in page
    assert page.count('class="spark"') == 5  # the run time, three regions and the residual, one line each
    assert "default-src 'none'" in page


def test_compare_with_history_keeps_both_profiles_once(tmp_path):
    db = str(tmp_path / "history.db")
    before, after = TUNE_FOLDER / "before" / "profile.json", TUNE_FOLDER / "after" / "profile.json"

    first = invoke_cli("compare", str(before), str(after), "--history", "--history-db", db)
    again = invoke_cli("compare", str(before), str(after), "--history", "--history-db", db)
    folder = invoke_cli("compare", str(TUNE_FOLDER), "--history", "--history-db", db)
    ledger = invoke_cli("history", "ledger", "--db", db, "--json")

    assert first.stderr.startswith("history:  2 run(s) added to sqlite:///")
    assert again.stderr.endswith("history:  0 run(s) added to sqlite:///" + db + " (2 already there)\n")
    assert folder.stderr.endswith("(2 already there)\n")  # the profiles once, and the folder's predictions now
    assert [row["count"] for row in json.loads(ledger.stdout)] == [2]
