"""A history as a folder of profile files and one manifest, so nothing is locked in the database.

`export_history` writes each stored run's profile as ``run-<id>.json`` (as it was given) and
``history.json``: per file, its commit, branch, tags and domain, and the ledger's predictions.
`import_history` reads that folder back through the bounded readers: the manifest is checked field
by field, and each profile is loaded and validated like any other.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aitune.errors import HistoryError
from aitune.history.ledger import Prediction
from aitune.history.record import record_of
from aitune.history.store import HistoryStore
from aitune.report.io import dumps, load, read_json, write_atomic
from aitune.report.model import Profile, json_form

MANIFEST = "history.json"
FORMAT = "aitune-history-export"
VERSION = 1


@dataclass(frozen=True)
class Entry:
    """One exported run: its file, domain and provenance."""

    file: str
    domain: str
    commit: str | None
    branch: str | None
    tags: tuple[str, ...]
    predictions: tuple[Prediction, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "domain": self.domain,
            "commit": self.commit,
            "branch": self.branch,
            "tags": list(self.tags),
            "predictions": [vars(p) for p in self.predictions],
        }


def export_history(store: HistoryStore, folder: Path, progress: Callable[[int], None] = lambda _: None) -> int:
    """Write every stored run into ``folder`` (see the module), with the predictions recorded beside it; how many."""
    folder.mkdir(parents=True, exist_ok=True)
    predictions = store.run_predictions()
    entries = []
    for stored, document in store.documents():
        name = f"run-{stored.id}.json"
        write_atomic(folder / name, document)
        record = stored.record
        found = tuple(predictions.get(stored.id, ()))
        entries.append(Entry(name, record.domain, record.commit, record.branch, record.tags, found))
        progress(len(entries))
    manifest = {"format": FORMAT, "version": VERSION, "runs": [entry.to_dict() for entry in entries]}
    write_atomic(folder / MANIFEST, dumps(manifest))
    return len(entries)


def read_manifest(folder: Path) -> list[Entry]:
    """The folder's manifest as entries; `HistoryError` naming the first field that is wrong."""
    where = folder / MANIFEST
    if not where.is_file():
        raise HistoryError(f"{folder} has no {MANIFEST}, so `history export` did not write it; name such a folder.")
    raw = read_json(where)
    if not isinstance(raw, dict) or raw.get("format") != FORMAT or raw.get("version") != VERSION:
        raise HistoryError(f"{where}: not a history export of version {VERSION} (format {FORMAT!r}).")
    runs = raw.get("runs")
    if not isinstance(runs, list):
        raise HistoryError(f"{where}: runs must be a list.")
    return [_entry(item, f"{where}: runs[{index}]") for index, item in enumerate(runs)]


def _entry(item: Any, where: str) -> Entry:
    if not isinstance(item, dict):
        raise HistoryError(f"{where} must be an object.")
    name = item.get("file")
    if not isinstance(name, str) or Path(name).name != name or name in ("", ".", ".."):
        raise HistoryError(f"{where}.file must be a file name inside the export folder (got {name!r}).")
    if item.get("domain") not in ("cpu", "device"):
        raise HistoryError(f"{where}.domain must be cpu or device.")
    tags = item.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
        raise HistoryError(f"{where}.tags must be a list of strings.")
    for key in ("commit", "branch"):
        if item.get(key) is not None and not isinstance(item.get(key), str):
            raise HistoryError(f"{where}.{key} must be a string or null.")
    found = item.get("predictions", [])
    if not isinstance(found, list):
        raise HistoryError(f"{where}.predictions must be a list.")
    predictions = tuple(_prediction(p, f"{where}.predictions[{i}]") for i, p in enumerate(found))
    return Entry(name, item["domain"], item.get("commit"), item.get("branch"), tuple(tags), predictions)


def _prediction(item: Any, where: str) -> Prediction:
    if not isinstance(item, dict) or not all(isinstance(item.get(k), str) for k in ("backend", "device", "region")):
        raise HistoryError(f"{where} must hold backend, device and region as strings.")
    predicted, verified = item.get("predicted"), item.get("verified")
    if not _finite(predicted) or (verified is not None and not _finite(verified)):
        raise HistoryError(f"{where}: predicted (and verified, when given) must be finite numbers.")
    return Prediction(item["backend"], item["device"], item["region"], predicted, verified)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def import_entries(folder: Path) -> Iterator[tuple[Entry, Profile]]:
    """Each entry of the folder's manifest with its profile, loaded and validated."""
    for entry in read_manifest(folder):
        yield entry, load(folder / entry.file)


def import_history(store: HistoryStore, folder: Path, progress: Callable[[int], None] = lambda _: None) -> int:
    """Add every run of an exported folder to ``store``; how many."""
    count = 0
    for entry, document in import_entries(folder):
        record = record_of(document, commit=entry.commit, branch=entry.branch, tags=entry.tags, domain=entry.domain)
        run_id = store.add(record, json_form(document))
        store.add_predictions(run_id, record.machine, entry.predictions)
        count += 1
        progress(count)
    return count
