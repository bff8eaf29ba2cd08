"""The history's tables (SQLAlchemy Core) and its migrations: one schema for SQLite and PostgreSQL.

Every table carries the ``aitune_`` prefix, so a history can live in a database shared with other
tools, and a database without ``aitune_meta`` but with tables of its own is recognised as foreign.
``aitune_meta.schema_version`` says which migrations ran; `migrate` runs the missing ones in order,
inside one transaction that holds the database's write lock (SQLite: ``BEGIN IMMEDIATE``;
PostgreSQL: an advisory lock), so two CI jobs opening a new history at once create it once.

Why a versioned table of our own rather than Alembic: the history has one schema version, migrates
itself at open (no ``alembic upgrade`` step for users, no ``env.py`` and revision scripts to ship and
load), and SQLAlchemy's DDL constructs already speak both dialects. A later version that alters a
table adds one function to `MIGRATIONS`; Alembic's ``Operations`` can be driven from such a function
(``Operations(MigrationContext.configure(connection))``) where SQLite's limited ALTER needs its batch mode.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    inspect,
    select,
    text,
)

from aitune.errors import HistoryError

SCHEMA_VERSION = 1
PREFIX = "aitune_"

metadata = MetaData()

meta = Table(
    "aitune_meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", String(256), nullable=False),
)

runs = Table(
    "aitune_runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("recorded_at", String(40), nullable=False),  # ISO 8601, UTC: when the history got it
    Column("created_at", String(40), nullable=False),  # the profile's own time
    Column("workload", String(16), nullable=False),
    Column("workload_label", Text, nullable=False),
    Column("machine", String(16), nullable=False),
    Column("environment", Text, nullable=False),  # JSON: the machine's fields
    Column("domain", String(8), nullable=False),
    Column("run_median_us", Float, nullable=False),
    Column("peak_memory_bytes", BigInteger),
    Column("commit", String(64)),
    Column("branch", Text),
    Column("document", LargeBinary, nullable=False),  # the profile itself, gzipped JSON: exported as it came
    Index("aitune_runs_workload_machine", "workload", "machine", "id"),
    Index("aitune_runs_recorded", "recorded_at"),
)

series = Table(
    "aitune_series",
    metadata,
    Column("run_id", Integer, ForeignKey("aitune_runs.id", ondelete="CASCADE"), primary_key=True),
    Column("position", Integer, primary_key=True),  # 0: the run time, then the headline rows in order
    Column("path", Text, nullable=False),
    Column("label", Text, nullable=False),
    Column("role", String(16), nullable=False),
    Column("median_us", Float, nullable=False),
    Column("times_us", Text, nullable=False),  # JSON list: each measured run's time
)

tags = Table(
    "aitune_tags",
    metadata,
    Column("run_id", Integer, ForeignKey("aitune_runs.id", ondelete="CASCADE"), primary_key=True),
    Column("tag", String(200), primary_key=True),
)

predictions = Table(
    "aitune_predictions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", Integer, ForeignKey("aitune_runs.id", ondelete="CASCADE")),
    Column("recorded_at", String(40), nullable=False),
    Column("machine", String(16), nullable=False),
    Column("backend", String(64), nullable=False),
    Column("device", Text, nullable=False),
    Column("region", Text, nullable=False),
    Column("predicted", Float, nullable=False),  # end-to-end speedup suggest predicted
    Column("verified", Float),  # end-to-end speedup tune verified; None: not verified
    Index("aitune_predictions_machine", "machine", "backend"),
)


def _create_version_1(connection: Connection) -> None:
    metadata.create_all(connection, checkfirst=True)


MIGRATIONS: tuple[Callable[[Connection], None], ...] = (_create_version_1,)
"""``MIGRATIONS[i]`` brings a history from version i to i + 1."""


def schema_version(connection: Connection, where: str) -> int:
    """The history's version: 0 for an empty database; `HistoryError` for a foreign or newer one."""
    names = set(inspect(connection).get_table_names())
    if meta.name not in names:
        if names - set(metadata.tables):
            raise HistoryError(
                f"{where} holds tables of another program and no aitune history; point --db at a new file or database."
            )
        return 0
    value = connection.execute(select(meta.c.value).where(meta.c.key == "schema_version")).scalar()
    try:
        version = int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise HistoryError(f"{where}: its aitune_meta has no valid schema_version; it is damaged or foreign.") from None
    if version > SCHEMA_VERSION:
        raise HistoryError(
            f"{where} is a history of schema version {version}, newer than this aitune reads ({SCHEMA_VERSION}); "
            "upgrade aitune."
        )
    return version


def migrate(connection: Connection, where: str) -> None:
    """Bring the history to `SCHEMA_VERSION` inside the caller's write transaction (see the module)."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(741852963)"))  # one migrator at a time
    version = schema_version(connection, where)
    for step in MIGRATIONS[version:]:
        step(connection)
    if version < SCHEMA_VERSION:
        connection.execute(meta.delete().where(meta.c.key == "schema_version"))
        connection.execute(meta.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))
