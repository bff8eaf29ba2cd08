"""What `history add` reads from each path: a profile file, a tune folder (both profiles and the ledger's
predictions), or a folder of captures (every ``profile.json`` below it)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from aitune.compare.loop_report import PROFILE_NAME, is_tune_folder, read_tune_folder
from aitune.errors import HistoryError
from aitune.history.ledger import Prediction
from aitune.history.outcomes import predictions_of
from aitune.report.io import load
from aitune.report.model import Profile


@dataclass(frozen=True)
class Source:
    """One profile to add, with the predictions recorded beside it (a tune folder's after profile)."""

    name: str
    document: Profile
    predictions: tuple[Prediction, ...] = ()


def profile_files(paths: Sequence[Path]) -> list[Path]:
    """Each path as the profiles it stands for, tune folders kept whole; `HistoryError` for one that is neither
    a file nor a folder."""
    found: list[Path] = []
    for path in paths:
        if path.is_file() or is_tune_folder(path):
            found.append(path)
        elif path.is_dir():
            found.extend(sorted(path.rglob(PROFILE_NAME)))
        else:
            raise HistoryError(f"{path} does not exist; name profile files, tune folders or folders of captures.")
    return found


def sources_of(path: Path) -> Iterator[Source]:
    """The profiles a file or tune folder holds (see the module), each read through the bounded reader."""
    if not is_tune_folder(path):
        yield Source(str(path), load(path))
        return
    folder = read_tune_folder(path)
    yield Source(f"{path} (before)", folder.before)
    yield Source(f"{path} (after)", folder.after, tuple(predictions_of(folder)))
