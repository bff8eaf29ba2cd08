"""The history store against real databases: SQLite files and a PostgreSQL server (`postgres_server`).

Each rule runs on both: what goes in comes back, concurrent writers lose nothing, prune bounds what is
kept, export and import round-trip, stored text stays data, and a damaged or foreign database gets one
sentence.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from documents import pipeline_doc
from sqlalchemy import inspect

from aitune.errors import HistoryError
from aitune.history import schema
from aitune.history.database import open_read_only, open_store
from aitune.history.exchange import MANIFEST, export_history, import_history
from aitune.history.ledger import Prediction
from aitune.history.record import record_of
from aitune.report.io import dumps, save, unpacked

ROOT = Path(__file__).resolve().parent.parent
HOSTILE_TAG = "x'); DROP TABLE aitune_runs; --"


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path) -> str:
    """A new, empty history: a SQLite file, or a database of its own on the session's PostgreSQL server."""
    if request.param == "sqlite":
        return str(tmp_path / "history.db")
    return request.getfixturevalue("postgres_url")


def doc(unet_us: float = 100.0, **meta):
    return pipeline_doc(unet_us, **meta)


def test_a_run_comes_back_as_it_went_in(url):
    document = doc()
    record = record_of(document, commit="abc123", branch="main", tags=["nightly", HOSTILE_TAG])

    with open_store(url) as store:
        run_id = store.add(record, document)
        stored = store.recent(record.workload, record.machine, limit=5)

    assert [(run.id, run.record) for run in stored] == [(run_id, record)]


def test_stored_text_is_data_never_sql(url):
    document = doc()

    with open_store(url) as store:
        store.add(record_of(document, tags=[HOSTILE_TAG], branch=HOSTILE_TAG), document)
        store.add(record_of(document), document)
        on_branch = store.recent(record_of(document).workload, None, limit=5, branch=HOSTILE_TAG)
        total = store.count()

    assert total == 2
    assert [run.record.tags for run in on_branch] == [(HOSTILE_TAG,)]


def test_reopening_a_history_migrates_nothing_twice(url):
    with open_store(url) as store:
        store.add(record_of(doc()), doc())

    with open_store(url) as store, store.reading() as connection:
        version = schema.schema_version(connection, store.where)
        tables = set(inspect(connection).get_table_names())
        count = store.count()

    assert (version, count) == (schema.SCHEMA_VERSION, 1)
    assert tables == set(schema.metadata.tables)


WRITER = """
import sys
from aitune.history.record import record_of
from aitune.history.database import open_read_only, open_store
from aitune.report.io import load
from aitune.report.model import json_form
document = load(sys.argv[2])
with open_store(sys.argv[1]) as store:
    for index in range(200):
        store.add(record_of(document, tags=[f"{sys.argv[3]}-{index}"]), json_form(document))
"""


def test_two_processes_adding_200_runs_each_lose_none(url, tmp_path):
    profile = save(doc(), tmp_path / "profile.json")
    with open_store(url):
        pass  # created once here: the race under test is between writers, not creators
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}

    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, url, str(profile), name], env=env, stderr=subprocess.PIPE)
        for name in ("first", "second")
    ]
    errors = [writer.communicate(timeout=600)[1].decode() for writer in writers]

    assert [writer.returncode for writer in writers] == [0, 0], errors
    with open_store(url) as store:
        stored = store.recent(record_of(doc()).workload, None, limit=1000)
    tags = sorted(tag for run in stored for tag in run.record.tags)
    assert tags == sorted(f"{name}-{index}" for name in ("first", "second") for index in range(200))


def test_two_processes_creating_a_new_history_at_once_create_it_once(url, tmp_path):
    profile = save(doc(), tmp_path / "profile.json")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    few = WRITER.replace("range(200)", "range(5)")

    writers = [
        subprocess.Popen([sys.executable, "-c", few, url, str(profile), name], env=env, stderr=subprocess.PIPE)
        for name in ("first", "second")
    ]
    errors = [writer.communicate(timeout=600)[1].decode() for writer in writers]

    assert [writer.returncode for writer in writers] == [0, 0], errors
    with open_store(url) as store:
        assert store.count() == 10


def test_prune_keeps_the_last_runs_of_each_workload_and_drops_old_ones(url):
    small, other = doc(100.0), doc(100.0, target={"type": "other.Model"})
    with open_store(url) as store:
        for _ in range(4):
            store.add(record_of(small), small)
        first_other = store.add(record_of(other), other)
        store.add(record_of(other), other)
        store.add_predictions(first_other, "m", [Prediction("ort", "cpu", "unet", 1.5, 1.2)])

        kept_two = store.prune(keep_last=2)
        counts = (store.count(), len(store.predictions()))
        none_recent = store.prune(older_than_days=1)
        all_old = store.prune(older_than_days=0)

    assert kept_two == 2
    assert counts == (4, 1)  # the other workload's two runs were its last two: its prediction stays
    assert (none_recent, all_old) == (0, 4)


def test_export_then_import_keeps_runs_provenance_and_predictions(url, tmp_path):
    document = doc()
    with open_store(url) as store:
        run_id = store.add(record_of(document, commit="c1", branch="main", tags=["a"]), document)
        store.add_predictions(run_id, "m", [Prediction("onnxruntime", "cpu", "unet", 1.5, 1.25)])
        store.add(record_of(doc(200.0), commit="c2"), doc(200.0))
        exported = export_history(store, tmp_path / "export")
        before = [run.record for run in store.recent(record_of(document).workload, None, 10)]

    with open_store(tmp_path / "again.db") as again:
        imported = import_history(again, tmp_path / "export")
        after = [run.record for run in again.recent(record_of(document).workload, None, 10)]
        predictions = again.predictions()

    assert (exported, imported) == (2, 2)
    assert after == before
    assert predictions == [Prediction("onnxruntime", "cpu", "unet", 1.5, 1.25)]


def test_an_export_naming_a_file_outside_its_folder_is_refused(tmp_path):
    folder = tmp_path / "export"
    folder.mkdir()
    save(doc(), tmp_path / "outside.json")
    manifest = {
        "format": "aitune-history-export",
        "version": 1,
        "runs": [{"file": "../outside.json", "domain": "cpu", "tags": []}],
    }
    (folder / MANIFEST).write_bytes(dumps(manifest))

    with open_store(tmp_path / "h.db") as store, pytest.raises(HistoryError, match=r"runs\[0\]\.file must be a file"):
        import_history(store, folder)


def test_a_file_that_is_not_a_database_gets_one_sentence(tmp_path):
    path = tmp_path / "history.db"
    path.write_bytes(b"this is a text file, not SQLite\n" * 100)

    with pytest.raises(HistoryError) as raised:
        open_store(path)

    message = str(raised.value)
    assert message.startswith(f"sqlite:///{path}: the database refused (file is not a database)")
    assert "\n" not in message


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE aitune_series SET times_us = 'not json'",
        "UPDATE aitune_series SET times_us = '[\"text\"]'",
        "UPDATE aitune_runs SET environment = '[1, 2]'",
        "DELETE FROM aitune_series WHERE position = 0",
    ],
    ids=["samples-not-json", "samples-not-numbers", "environment-not-an-object", "no-run-time"],
)
def test_a_damaged_value_in_a_history_gets_one_sentence(tmp_path, damage):
    path = tmp_path / "history.db"
    with open_store(path) as store:
        store.add(record_of(doc()), doc())
    with sqlite3.connect(path) as connection:
        connection.execute(damage)

    with open_store(path) as store, pytest.raises(HistoryError) as raised:
        store.recent(record_of(doc()).workload, None, limit=5)

    assert "holds a value aitune did not write" in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_sqlite_database_of_another_program_is_refused_untouched(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE users (name TEXT)")

    with pytest.raises(HistoryError, match="holds tables of another program and no aitune history"):
        open_store(path)

    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT name FROM sqlite_master").fetchall() == [("users",)]


def test_a_history_opened_read_only_is_read_and_never_written(tmp_path):
    path = tmp_path / "history.db"
    with open_store(path) as store:
        run_id = store.add(record_of(doc()), doc())

    with open_read_only(path, "history.db") as history:
        (workload,) = history.workloads()
        stored = history.document(run_id)
        with pytest.raises(HistoryError, match="attempt to write a readonly database"), history.writing() as write:
            write.execute(schema.runs.delete())
        assert len(history.trend(workload.workload, workload.machine, 10)) == 1

    assert stored is not None and unpacked(stored, "run") == dumps(doc())


@pytest.mark.parametrize("content", ["", "users"], ids=["empty-file", "another-programs-database"])
def test_a_file_opened_read_only_that_is_no_history_is_refused_untouched(tmp_path, content):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as connection:
        if content:
            connection.execute(f"CREATE TABLE {content} (name TEXT)")
    before = path.read_bytes()

    with pytest.raises(HistoryError, match="no aitune history"):
        open_read_only(path, "other.db")

    assert path.read_bytes() == before


def test_a_history_of_a_newer_schema_is_refused(url):
    with open_store(url) as store, store.writing() as connection:
        connection.execute(schema.meta.update().values(value="99"))

    with pytest.raises(HistoryError, match="schema version 99, newer than this aitune reads"):
        open_store(url)


def test_an_unreachable_server_gets_one_sentence(tmp_path):
    url = f"postgresql://nobody@/nothing?host={tmp_path}&port=1"

    with pytest.raises(HistoryError) as raised:
        open_store(url)

    assert str(raised.value).startswith("postgresql+psycopg://nobody@/nothing")
    assert "\n" not in str(raised.value)


def test_a_url_of_another_database_kind_is_refused():
    with pytest.raises(HistoryError, match="runs on SQLite or PostgreSQL"):
        open_store("mysql://user@host/db")


def test_the_history_module_runs_without_sqlalchemy_until_a_store_opens():
    code = textwrap.dedent("""
        import sys
        import aitune.history.check, aitune.history.ledger, aitune.history.steps, aitune.history.record
        import aitune.history.trend
        assert "sqlalchemy" not in sys.modules, sorted(m for m in sys.modules if m.startswith("sqlalchemy"))
    """)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
