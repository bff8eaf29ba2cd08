"""The per-user cache folder (``$AITUNE_CACHE_DIR``, else ``~/.cache/aitune``): the one door to its files.

A cache is a file aitune wrote earlier, but anyone who could write there may have written it since, so
it is read as any untrusted file: a folder or file that is a symbolic link, not ours, or writable by
group or others is never read, followed, re-permissioned or written into; a file is read through the
bounded reader (`aitune.report.io`, no NaN or Infinity) and its values through the caller's check.
Whatever fails is ignored with one logged sentence, the figures are measured again, and the file is
rewritten atomically; where the folder cannot be used (a file in its place, a read-only disk, a link)
they are measured each time without caching. Nothing here raises.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import orjson

from aitune.errors import ProfileError
from aitune.report.io import parse_json, read_regular, write_new_file

logger = logging.getLogger(__name__)

T = TypeVar("T")

MAX_CACHE_ITEMS = 1_000
"""Most JSON values a cache file may hold: a calibration holds about 20, a backend's peaks about 10."""
MAX_CACHE_DEPTH = 4
"""Deepest nesting of a cache file: its figures nest two levels."""

_said: set[str] = set()  # sentences already logged by this process: a folder's problem is said once


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """``$AITUNE_CACHE_DIR``, else ``~/.cache/aitune``: the root of every cache aitune keeps for the user."""
    root = (os.environ if environ is None else environ).get("AITUNE_CACHE_DIR")
    return Path(root) if root else Path.home() / ".cache" / "aitune"


def unsafe_because(path: Path, folder: bool = True) -> str | None:
    """Why ``path`` may not be trusted as a cache folder (``folder``) or file: a link, another kind of
    file, not ours, open to others' writes; None when it may."""
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):  # a file above it: made (and refused) when written
        return "it does not exist"
    except OSError as error:
        return f"it cannot be examined ({error.strerror or error})"
    if stat.S_ISLNK(info.st_mode):
        return "it is a symbolic link"
    if not (stat.S_ISDIR if folder else stat.S_ISREG)(info.st_mode):
        return f"it is not a {'folder' if folder else 'regular file'}"
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        return f"it belongs to user id {info.st_uid}"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"group or others may write to it (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def make_private(path: Path) -> None:
    """Create ``path`` and the missing folders above it, mode 0700; an existing one (a link included) is
    left as it is, never followed or re-permissioned. `OSError` when one cannot be made."""
    missing = []
    for folder in (path, *path.parents):
        if folder.exists() or folder.is_symlink():
            break
        missing.append(folder)
    for folder in reversed(missing):
        os.mkdir(folder, 0o700)  # mode masked by umask only towards fewer rights


def read_cached(path: Path, what: str, check: Callable[[Any], T | None], max_bytes: int) -> T | None:
    """What ``check`` makes of the cache file ``path`` (``what`` it holds, for the sentence), or None: no
    such file yet, or one not to trust (said once, so the caller measures again and rewrites it)."""
    folder_problem = unsafe_because(path.parent)
    if folder_problem == "it does not exist":
        return None
    if folder_problem:
        _say_unused(path.parent, folder_problem)
        return None
    file_problem = unsafe_because(path, folder=False)
    if file_problem == "it does not exist":
        return None
    if file_problem:
        return _ignored(path, file_problem)
    size = os.lstat(path).st_size
    if size > max_bytes:
        return _ignored(path, f"it holds {size:,} bytes, more than a cache of {what} ever does ({max_bytes:,})")
    try:
        data = read_regular(path, max_bytes)
        found = parse_json(data, str(path), max_bytes, max_items=MAX_CACHE_ITEMS, max_depth=MAX_CACHE_DEPTH)
    except ProfileError as error:  # its first clause: the reader's fix is for a user's file, not a cache
        return _ignored(path, str(error).removeprefix(f"{path}: ").split("; ")[0].rstrip("."))
    checked = check(found)
    if checked is None:
        return _ignored(path, f"it does not hold {what} (a figure missing, not finite or out of range)")
    return checked


def write_cached(path: Path, value: Any) -> bool:
    """Write ``value`` as JSON to the cache file ``path`` atomically, its folder made private first;
    False, said once per folder, where the folder may not or cannot be used."""
    folder = path.parent
    try:
        make_private(folder)
    except OSError as error:
        return _say_unused(folder, f"it could not be created ({error.strerror or error})")
    problem = unsafe_because(folder)
    if problem:
        return _say_unused(folder, problem)
    temporary = folder / f".{path.name}.{secrets.token_hex(8)}"
    try:  # the folder is ours alone (checked above): a fresh name and a rename suffice
        write_new_file(temporary, orjson.dumps(value))
        os.replace(temporary, path)
    except OSError as error:
        with contextlib.suppress(OSError):
            temporary.unlink()
        return _say_unused(folder, f"a file cannot be written in it ({error.strerror or error})")
    return True


def _ignored(path: Path, problem: str) -> None:
    _say(f"aitune: the cache file {path} is ignored: {problem}; it is measured again and rewritten.")
    return None


def _say_unused(folder: Path, problem: str) -> bool:
    _say(f"aitune: the cache folder {folder} is not used: {problem}; figures are measured without caching.")
    return False


def _say(sentence: str) -> None:
    if sentence not in _said:
        _said.add(sentence)
        logger.warning(sentence)
