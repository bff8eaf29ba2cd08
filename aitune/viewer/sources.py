"""Reading profiles and traces for the viewer: from a runs folder or from uploaded bytes, defensively.

The files may come from a stranger (a bug report), so every read goes through the command line's one
bounded reader (`aitune.report.io`: regular files only, size, gzip expansion, value count) with the
viewer's tighter limits (size, nesting depth), and names must resolve inside the runs folder. A name
may come from a URL, so it can hold anything (a NUL byte, thousands of characters): every failure
to find or read a file is one sentence, never an `OSError` or `ValueError` from the file system.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from aitune.analysis import TraceEvents
from aitune.analysis.trace_json import trace_events_from_json
from aitune.compare.loop_report import (
    AFTER_FOLDER,
    BEFORE_FOLDER,
    COMPARE_REPORT,
    REPORT_FILES,
    LoopReport,
    read_compare_report,
)
from aitune.errors import ProfileError
from aitune.report import io as report_io
from aitune.report import scenario_names, select_scenario
from aitune.report.model import Profile, ProfileLike, as_profile, given
from aitune.report.problems import shortened

MAX_FILE_BYTES = 20 * 1024 * 1024
"""Largest profile or trace the viewer reads (after gunzip); a profile is usually well under 1 MB."""

MAX_DEPTH = 64
"""Deepest JSON nesting accepted; profiles nest about 6 levels, and deep input can exhaust recursion."""

MAX_LISTED = 500
"""Most files listed from a runs folder, so a huge folder cannot stall the page."""


@dataclass(frozen=True)
class Loaded:
    """One profile ready for the store: its display name, the document, and its trace(s) when found."""

    name: str
    doc: ProfileLike
    trace_path: Path | None = None
    scenario_traces: Mapping[str, Path | None] = field(default_factory=dict)
    path: Path | None = None  # the file inside the runs folder; None for an upload

    def scenario(self, name: str | None) -> Loaded:
        """This profile as if only scenario ``name`` had been profiled; itself for None or a name it lacks."""
        if name is None or name not in scenario_names(self.doc):
            return self
        doc = select_scenario(self.doc, name)
        return Loaded(self.name, doc, self.scenario_traces.get(name), self.scenario_traces, self.path)


HISTORY_SUFFIXES = (".db", ".sqlite", ".sqlite3")
"""The files the History tab offers as history databases (`aitune-profile history --db` writes any name)."""


def list_profiles(root: Path) -> list[str]:
    """Names (relative to ``root``, with ``/``) of the profile JSON files under it, sorted; traces excluded,
    and so are the reports a tune folder holds beside its profiles, and links that lead out of ``root``
    (they would be refused when opened)."""
    return _listed(root, "*.json", lambda path: "trace" not in path.name and path.name not in REPORT_FILES)


def list_histories(root: Path) -> list[str]:
    """Names of the history databases (`HISTORY_SUFFIXES`) under ``root``, listed as `list_profiles` lists."""
    return _listed(root, "*", lambda path: path.suffix in HISTORY_SUFFIXES)


def _listed(root: Path, pattern: str, wanted: Callable[[Path], bool]) -> list[str]:
    if not root.is_dir():
        return []
    base = root.resolve()
    names = sorted(
        path.relative_to(root).as_posix()
        for path in root.rglob(pattern)
        if wanted(path) and _is_file_inside(base, path)
    )
    return names[:MAX_LISTED]


def resolve_inside(root: Path, name: str) -> Path:
    """The file ``name`` names inside ``root``; `ProfileError` when it escapes the folder, does not exist,
    or is no name a file can have (a NUL byte, longer than the file system allows)."""
    base = root.resolve()
    shown = shortened(repr(name))
    try:
        candidate = (base / name).resolve()
        inside = candidate.is_relative_to(base)
        found = inside and candidate.is_file()
    except (OSError, ValueError) as error:  # ValueError: a NUL byte; OSError: ENAMETOOLONG, ELOOP, EACCES
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise ProfileError(f"{shown} cannot be a file name ({reason}); pick a profile from the list.") from None
    if not inside:
        raise ProfileError(f"{shown} is outside the runs folder; name a file listed in the runs folder.")
    if not found:
        raise ProfileError(f"{shown} is not a file in the runs folder; pick one from the list.")
    return candidate


def _is_file_inside(base: Path, path: Path) -> bool:
    try:
        return path.is_file() and path.resolve().is_relative_to(base)
    except OSError:  # a link loop, or a name the file system cannot stat
        return False


def read_bounded(path: Path, name: str) -> bytes:
    """The bytes of the regular file ``path`` when it is at most `MAX_FILE_BYTES`: the command line's one
    door (`aitune.report.io.read_regular`: no FIFO, device or folder) with the viewer's limit;
    `ProfileError` naming ``name`` otherwise."""
    return report_io.read_regular(path, MAX_FILE_BYTES, _VIEWER_FIX, name=name, whose="the viewer's")


def read_trace_file(path: Path, name: str) -> TraceEvents:
    """The events of the Chrome trace at ``path``, read with the viewer's limits; `ProfileError` naming
    ``name`` when it is unreadable, not a trace, or holds a malformed event."""
    return trace_events_from_json(
        lambda: report_io.unpacked(read_bounded(path, name), name, MAX_FILE_BYTES, _VIEWER_FIX),
        name,
        lambda json: parse_json(json, name),
    )


def parse_json(data: bytes, name: str) -> Any:
    """Parse JSON bytes (gunzipped first when gzipped): the command line's reader (`aitune.report.io.parse_json`)
    with the viewer's tighter size and depth limits; one-sentence errors."""
    return report_io.parse_json(
        data, name, MAX_FILE_BYTES, _VIEWER_FIX, max_items=report_io.MAX_PROFILE_ITEMS, max_depth=MAX_DEPTH
    )


def profile_from_bytes(data: bytes, name: str) -> Profile:
    """A validated profile document from file bytes, ours or AITune's (`aitune.report.io.checked_profile_json`),
    gunzipped first with the viewer's size limit; `ProfileError` names the problem."""
    json = report_io.unpacked(data, name, MAX_FILE_BYTES, _VIEWER_FIX)
    return report_io.checked_profile_json(json, name, hint=False, parse=lambda refused: parse_json(refused, name))


def load_from_folder(root: Path, name: str) -> Loaded:
    """Load the profile ``name`` from the runs folder, with its Chrome trace when one sits beside it."""
    path = resolve_inside(root, name)
    stat = path.stat()
    doc = _validated_file(path, stat.st_mtime_ns, stat.st_size, name)
    scenario_traces = {
        scenario: trace_beside(path, select_scenario(doc, scenario), root) for scenario in scenario_names(doc)
    }
    return Loaded(name, doc, trace_beside(path, doc, root), scenario_traces, path)


def tune_folder(before: Loaded, after: Loaded) -> Path | None:
    """The folder ``aitune-profile tune`` wrote, when the two profiles are its ``before/`` and ``after/`` ones
    and its compare report sits beside them; None for any other pair (uploads included)."""
    if before.path is None or after.path is None:
        return None
    folder = before.path.parent.parent
    sides = (before.path.parent, after.path.parent)
    if sides != (folder / BEFORE_FOLDER, folder / AFTER_FOLDER) or not (folder / COMPARE_REPORT).is_file():
        return None
    return folder


def read_tune_report(folder: Path, root: Path) -> LoopReport:
    """The compare report of a tune folder inside ``root``, read with the size and depth limits; `ProfileError`
    in one sentence when it is unreadable or not a tune folder's report."""
    name = (folder / COMPARE_REPORT).relative_to(root.resolve()).as_posix()
    path = resolve_inside(root, name)  # the report may be a link out of the runs folder
    return read_compare_report(path, name, lambda file, shown: parse_json(read_bounded(file, shown), shown))


@lru_cache(maxsize=32)
def _validated_file(path: Path, mtime_ns: int, size: int, name: str) -> Profile:
    # Every browser session re-runs the app; schema validation of a large profile takes most of a
    # second, so a file unchanged since (same mtime and size) is read once per server process.
    # The viewer never mutates a document, so sessions may share it.
    return profile_from_bytes(read_bounded(path, name), name)


def trace_beside(profile_path: Path, doc: ProfileLike, root: Path) -> Path | None:
    """The trace the document names (``trace_file``), when it is a file next to the profile inside ``root``."""
    trace_name = given(as_profile(doc).trace_file, "")
    if not trace_name:
        return None
    folder = profile_path.parent.relative_to(root.resolve()).as_posix()
    try:
        return resolve_inside(root, f"{folder}/{Path(trace_name).name}")
    except ProfileError:
        return None


_VIEWER_FIX = "capture fewer runs, or read it with `aitune-profile report` instead"
