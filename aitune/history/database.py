"""Opening a history: a URL or a file path to an engine, configured and migrated.

`open_store` takes a URL (``postgresql://user@host/db``, ``sqlite:///path``) or a plain file path; the
default is `DEFAULT_PATH` in the current folder. SQLite runs in WAL mode with a long busy timeout and
takes its write lock at the start of each write (``BEGIN IMMEDIATE``), so concurrent writers queue
instead of failing; PostgreSQL goes through psycopg 3. `open_read_only` opens a history file that may come
from a stranger (the viewer's trend page) without writing to it, migrating it, or trusting its schema.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import NullPool

from aitune.errors import HistoryError
from aitune.history import schema
from aitune.history.store import HistoryStore

DEFAULT_PATH = Path(".aitune") / "history.db"
BUSY_TIMEOUT_S = 60


def database_url(target: str | Path | None) -> str:
    """``target`` as a SQLAlchemy URL: a URL as given (``postgresql://`` uses psycopg 3), a path as SQLite."""
    text = str(target) if target is not None else str(DEFAULT_PATH)
    if "://" not in text:
        return f"sqlite:///{Path(text).expanduser().resolve()}"
    scheme, rest = text.split("://", 1)
    if scheme in ("postgresql", "postgres"):
        return f"postgresql+psycopg://{rest}"
    return text


def shown_url(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "the history database"


def open_store(target: str | Path | None = None) -> HistoryStore:
    """The history at ``target`` (see `database_url`), created or migrated as needed; `HistoryError` if it cannot be."""
    url = database_url(target)
    where = shown_url(url)
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise HistoryError(f"{target} is not a database URL or a file path; pass e.g. .aitune/history.db.") from None
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise HistoryError(f"{where}: the history runs on SQLite or PostgreSQL; pass a file path or postgresql://.")
    if parsed.get_backend_name() == "sqlite":
        if not parsed.database:
            raise HistoryError("an in-memory SQLite history keeps nothing; pass a file path.")
        _make_parent(Path(parsed.database))
        engine = _sqlite_engine(url)
    else:
        engine = create_engine(url)
    store = HistoryStore(engine, where)
    with store.writing() as connection:
        schema.migrate(connection, where)
    return store


def open_read_only(path: Path, name: str) -> HistoryStore:
    """The SQLite history file at ``path`` (shown as ``name``), opened read-only: nothing is created, migrated or
    written (``mode=ro``, ``query_only``), and SQL stored in the file (views, triggers) may call no function with
    side effects (``trusted_schema = OFF``); `HistoryError` in one sentence when it is not an aitune history."""
    uri = f"{path.resolve().as_uri()}?mode=ro"  # as_uri escapes the name: a `?` or `#` in it stays a name
    engine = _sqlite_engine("sqlite://", read_only=True, creator=lambda: sqlite3.connect(uri, uri=True))
    store = HistoryStore(engine, name)
    try:
        with store.reading() as connection:
            version = schema.schema_version(connection, name)
    except HistoryError:
        store.close()
        raise
    if version == 0:
        store.close()
        raise HistoryError(f"{name} holds no aitune history; pick a file `aitune-profile history add` wrote.")
    return store


def _make_parent(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise HistoryError(f"cannot make the history's folder {path.parent} ({error.strerror}).") from None


def _sqlite_engine(url: str, read_only: bool = False, creator: Callable[[], Any] | None = None) -> Engine:
    if creator is None:
        engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_S})
    else:  # a connection per checkout, closed after: the viewer reads from its sessions' threads
        engine = create_engine(url, creator=creator, poolclass=NullPool)
    settings = ("query_only = ON", "trusted_schema = OFF") if read_only else ("journal_mode = WAL",)

    @event.listens_for(engine, "connect")
    def _configure(connection: Any, _record: Any) -> None:
        connection.isolation_level = None  # transactions are begun below, as each needs
        cursor = connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_S * 1000}")
        cursor.execute("PRAGMA foreign_keys = ON")
        for setting in settings:
            cursor.execute(f"PRAGMA {setting}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        # A write takes the lock first: a read-then-write transaction upgraded later fails at once when busy.
        connection.exec_driver_sql("BEGIN IMMEDIATE" if connection.get_execution_options().get("write") else "BEGIN")

    return engine
