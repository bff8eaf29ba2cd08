"""The history store: runs, their samples and tags, and the ledger's predictions, in SQLite or PostgreSQL.

`aitune.history.database.open_store` opens one. Every value goes to the database as a bound parameter
(SQLAlchemy Core): no stored text is ever part of a statement. Database failures, and stored values that
are not what `HistoryStore.add` wrote, become one `HistoryError` sentence naming the store.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Connection, Engine, delete, func, select
from sqlalchemy.exc import SQLAlchemyError

from aitune.errors import HistoryError
from aitune.history import schema
from aitune.history.ledger import Prediction
from aitune.history.record import RunRecord, Series
from aitune.report.io import dumps, gzipped, unpacked


@dataclass(frozen=True)
class StoredRun:
    """A run as the store holds it: its id and when it was recorded, beside its record."""

    id: int
    recorded_at: str
    record: RunRecord


@dataclass(frozen=True)
class Workload:
    """One workload on one machine kind, as `HistoryStore.workloads` lists it."""

    workload: str
    label: str
    machine: str
    runs: int
    last_recorded: str


@dataclass(frozen=True)
class TrendPoint:
    """One stored run in a trend: its id, commit, and the median (µs) of each row it has."""

    id: int
    recorded_at: str
    commit: str | None
    medians: Mapping[str, float]  # path → median µs; the run time under `record.RUN_TIME`


class HistoryStore:
    """An open history. Methods translate database failures into `HistoryError`; `close` releases connections."""

    def __init__(self, engine: Engine, where: str) -> None:
        self.engine = engine
        self.where = where

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def writing(self) -> Iterator[Connection]:
        """One write transaction (committed on success, rolled back on error)."""
        with self._guarded(), self.engine.connect() as connection:
            connection.execution_options(write=True)
            with connection.begin():
                yield connection

    @contextlib.contextmanager
    def reading(self) -> Iterator[Connection]:
        with self._guarded(), self.engine.connect() as connection, connection.begin():
            yield connection

    @contextlib.contextmanager
    def _guarded(self) -> Iterator[None]:
        try:
            yield
        except SQLAlchemyError as error:
            cause = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
            raise HistoryError(
                f"{self.where}: the database refused ({cause}); is it an aitune history, and reachable?"
            ) from None
        except (ValueError, TypeError) as error:  # a stored value that is not what `add` wrote: data, not a bug
            cause = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
            raise HistoryError(
                f"{self.where} holds a value aitune did not write ({cause}); it is damaged or was edited by hand, "
                "so point --db at another history."
            ) from None

    def add(self, record: RunRecord, document: Mapping[str, Any]) -> int:
        """Store one run and its profile; its id."""
        row = {
            "recorded_at": _now(),
            "created_at": record.created_at,
            "workload": record.workload,
            "workload_label": record.workload_label,
            "machine": record.machine,
            "environment": orjson.dumps(record.environment).decode(),
            "domain": record.domain,
            "run_median_us": record.run_time.median_us,
            "peak_memory_bytes": record.peak_memory_bytes,
            "commit": record.commit,
            "branch": record.branch,
            "document": gzipped(dumps(document)),
        }
        with self.writing() as connection:
            run_id = int(connection.execute(schema.runs.insert().values(**row)).inserted_primary_key[0])
            connection.execute(schema.series.insert(), [_series_row(run_id, i, s) for i, s in enumerate(record.series)])
            if record.tags:
                connection.execute(schema.tags.insert(), [{"run_id": run_id, "tag": tag} for tag in set(record.tags)])
        return run_id

    def stored_id(self, record: RunRecord) -> int | None:
        """The id of a stored run of this workload and machine created at the same time with the same run times."""
        runs, series = schema.runs, schema.series
        query = (
            select(runs.c.id)
            .join(series, (series.c.run_id == runs.c.id) & (series.c.position == 0))
            .where(
                runs.c.workload == record.workload,
                runs.c.machine == record.machine,
                runs.c.created_at == record.created_at,
                series.c.times_us == orjson.dumps(record.run_time.times_us).decode(),
            )
            .limit(1)
        )
        with self.reading() as connection:
            return connection.execute(query).scalar()

    def has_predictions(self, run_id: int) -> bool:
        query = select(schema.predictions.c.id).where(schema.predictions.c.run_id == run_id).limit(1)
        with self.reading() as connection:
            return connection.execute(query).first() is not None

    def recent(
        self, workload: str, machine: str | None, limit: int, branch: str | None = None, before_id: int | None = None
    ) -> list[StoredRun]:
        """The last ``limit`` runs of ``workload`` (on ``machine``, ``branch``, before ``before_id``), oldest first."""
        query = select(*_RECORD_COLUMNS).where(schema.runs.c.workload == workload)
        if machine is not None:
            query = query.where(schema.runs.c.machine == machine)
        if branch is not None:
            query = query.where(schema.runs.c.branch == branch)
        if before_id is not None:
            query = query.where(schema.runs.c.id < before_id)
        query = query.order_by(schema.runs.c.id.desc()).limit(limit)
        with self.reading() as connection:
            rows = list(connection.execute(query).mappings())
            ids = [row["id"] for row in rows]
            found = _series_of(connection, ids)
            labels = _tags_of(connection, ids)
            return [_stored(row, found.get(row["id"], ()), labels.get(row["id"], ())) for row in reversed(rows)]

    def workloads(self) -> list[Workload]:
        """Every workload and machine kind with its run count, most recently recorded first (labelled as its
        latest run is). The counts come from the (workload, machine, id) index alone, and one row per group is
        read: a scan of the runs themselves would read every stored profile's pages."""
        runs = schema.runs
        groups = (
            select(runs.c.workload, runs.c.machine, func.count().label("runs"), func.max(runs.c.id).label("latest"))
            .group_by(runs.c.workload, runs.c.machine)
            .subquery()
        )
        query = (
            select(groups.c.workload, runs.c.workload_label, groups.c.machine, groups.c.runs, runs.c.recorded_at)
            .join(runs, runs.c.id == groups.c.latest)
            .order_by(groups.c.latest.desc())
        )
        with self.reading() as connection:
            return [Workload(*row) for row in connection.execute(query)]

    def trend(self, workload: str, machine: str | None, limit: int) -> list[TrendPoint]:
        """The last ``limit`` runs of the workload, oldest first, with each row's median."""
        query = select(schema.runs.c.id, schema.runs.c.recorded_at, schema.runs.c.commit).where(
            schema.runs.c.workload == workload
        )
        if machine is not None:
            query = query.where(schema.runs.c.machine == machine)
        query = query.order_by(schema.runs.c.id.desc()).limit(limit)
        with self.reading() as connection:
            runs = list(connection.execute(query))
            ids = [run.id for run in runs]
            medians: dict[int, dict[str, float]] = {}
            rows = select(schema.series.c.run_id, schema.series.c.path, schema.series.c.median_us).where(
                schema.series.c.run_id.in_(ids)
            )
            for row in connection.execute(rows):
                medians.setdefault(row.run_id, {})[str(row.path)] = float(row.median_us)
            return [
                TrendPoint(run.id, str(run.recorded_at), _text(run.commit), medians.get(run.id, {}))
                for run in reversed(runs)
            ]

    def add_predictions(self, run_id: int | None, machine: str, found: Sequence[Prediction]) -> None:
        """Store suggest's predictions and tune's verified outcomes (of the run ``run_id``, when stored)."""
        if not found:
            return
        now = _now()
        rows = [
            {
                "run_id": run_id,
                "recorded_at": now,
                "machine": machine,
                "backend": p.backend,
                "device": p.device,
                "region": p.region,
                "predicted": p.predicted,
                "verified": p.verified,
            }
            for p in found
        ]
        with self.writing() as connection:
            connection.execute(schema.predictions.insert(), rows)

    def predictions(self, machine: str | None = None) -> list[Prediction]:
        """Every stored prediction (of ``machine``), oldest first."""
        table = schema.predictions
        query = select(table.c.backend, table.c.device, table.c.region, table.c.predicted, table.c.verified)
        if machine is not None:
            query = query.where(table.c.machine == machine)
        with self.reading() as connection:
            return [_prediction(*row) for row in connection.execute(query.order_by(table.c.id))]

    def run_predictions(self) -> dict[int, list[Prediction]]:
        """The stored predictions by the run they were recorded with, oldest first."""
        table = schema.predictions
        query = (
            select(table.c.run_id, table.c.backend, table.c.device, table.c.region, table.c.predicted, table.c.verified)
            .where(table.c.run_id.is_not(None))
            .order_by(table.c.id)
        )
        found: dict[int, list[Prediction]] = {}
        with self.reading() as connection:
            for run_id, *fields in connection.execute(query):
                found.setdefault(run_id, []).append(_prediction(*fields))
        return found

    def prune(self, keep_last: int | None = None, older_than_days: float | None = None) -> int:
        """Delete runs recorded more than ``older_than_days`` ago, and all but the last ``keep_last`` of each
        workload and machine kind; how many runs went (their samples, tags and predictions with them)."""
        runs = schema.runs
        doomed: set[int] = set()
        with self.writing() as connection:
            if older_than_days is not None:
                cutoff = (_utc() - datetime.timedelta(days=older_than_days)).isoformat()
                doomed |= set(connection.execute(select(runs.c.id).where(runs.c.recorded_at < cutoff)).scalars())
            if keep_last is not None:
                groups = connection.execute(select(runs.c.workload, runs.c.machine).distinct()).all()
                for workload, machine in groups:
                    query = (
                        select(runs.c.id)
                        .where(runs.c.workload == workload, runs.c.machine == machine)
                        .order_by(runs.c.id.desc())
                        .offset(keep_last)
                    )
                    doomed |= set(connection.execute(query).scalars())
            for table in (schema.series, schema.tags, schema.predictions):  # also where foreign keys are off
                connection.execute(delete(table).where(table.c.run_id.in_(doomed)))
            connection.execute(delete(runs).where(runs.c.id.in_(doomed)))
        return len(doomed)

    def documents(self) -> Iterator[tuple[StoredRun, bytes]]:
        """Every stored run, oldest first, with its profile's JSON bytes (read back through the bounded unpacker)."""
        with self.reading() as connection:
            ids = list(connection.execute(select(schema.runs.c.id).order_by(schema.runs.c.id)).scalars())
        for start in range(0, len(ids), 100):  # a page at a time: a history may not fit in memory
            chunk = ids[start : start + 100]
            with self.reading() as connection:
                rows = list(connection.execute(select(schema.runs).where(schema.runs.c.id.in_(chunk))).mappings())
                found, labels = _series_of(connection, chunk), _tags_of(connection, chunk)
                stored = [_stored(row, found.get(row["id"], ()), labels.get(row["id"], ())) for row in rows]
            for run, row in sorted(zip(stored, rows, strict=True), key=lambda pair: pair[0].id):
                yield run, unpacked(row["document"], f"{self.where} run {row['id']}")

    def document(self, run_id: int) -> bytes | None:
        """The stored profile of one run as stored (gzipped: its reader unpacks it within its own bounds); None
        when no such run is stored."""
        with self.reading() as connection:
            found = connection.execute(select(schema.runs.c.document).where(schema.runs.c.id == run_id)).scalar()
            if found is not None and not isinstance(found, bytes):
                raise TypeError(f"run {run_id}'s profile is not bytes")
        return found

    def count(self) -> int:
        with self.reading() as connection:
            return int(connection.execute(select(func.count()).select_from(schema.runs)).scalar_one())


_RECORD_COLUMNS = [column for column in schema.runs.c if column.name != "document"]
"""What a run's record needs: every column but the stored profile, which only export and the viewer's pair read."""


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _prediction(backend: Any, device: Any, region: Any, predicted: Any, verified: Any) -> Prediction:
    return Prediction(str(backend), str(device), str(region), float(predicted), _number(verified))


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _series_row(run_id: int, position: int, series: Series) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "position": position,
        "path": series.path,
        "label": series.label,
        "role": series.role,
        "median_us": series.median_us,
        "times_us": orjson.dumps(series.times_us).decode(),
    }


def _series_of(connection: Connection, ids: Sequence[int]) -> dict[int, list[Series]]:
    found: dict[int, list[Series]] = {}
    query = (
        select(schema.series)
        .where(schema.series.c.run_id.in_(ids))
        .order_by(schema.series.c.run_id, schema.series.c.position)
    )
    for row in connection.execute(query):
        times = tuple(float(value) for value in orjson.loads(row.times_us))
        found.setdefault(row.run_id, []).append(Series(str(row.path), str(row.label), str(row.role), times))
    return found


def _tags_of(connection: Connection, ids: Sequence[int]) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for row in connection.execute(select(schema.tags).where(schema.tags.c.run_id.in_(ids))):
        found.setdefault(row.run_id, []).append(str(row.tag))
    return found


def _stored(row: Mapping[str, Any], found: Sequence[Series], labels: Sequence[str]) -> StoredRun:
    """A stored row as a record; ValueError (a damaged history, see `HistoryStore._guarded`) where it is not one."""
    environment = orjson.loads(row["environment"])
    if not isinstance(environment, dict) or not found or found[0].role != "run":
        raise ValueError(f"run {row['id']} has no machine fields or no run time")
    record = RunRecord(
        created_at=row["created_at"],
        workload=row["workload"],
        workload_label=row["workload_label"],
        machine=row["machine"],
        environment=environment,
        domain=row["domain"],
        series=tuple(found),
        peak_memory_bytes=row["peak_memory_bytes"],
        commit=row["commit"],
        branch=row["branch"],
        tags=tuple(sorted(labels)),
    )
    return StoredRun(row["id"], row["recorded_at"], record)


def _utc() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _now() -> str:
    return _utc().isoformat()
