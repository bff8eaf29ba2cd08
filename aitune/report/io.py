"""Reading and writing profile documents and Chrome traces (plain or gzipped), with one clear error each."""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from aitune.analysis.events import TraceEvents, check_trace, gc_paused
from aitune.analysis.trace_json import trace_events_from_json
from aitune.errors import OutputError, ProfileError
from aitune.report.document import SCHEMA_VERSION, ProfileDoc
from aitune.report.validate import validate

_GZIP_MAGIC = b"\x1f\x8b"

MAX_JSON_BYTES = 1024 * 2**20
"""Largest JSON (after gunzip) the command line reads: a trace of 10⁶ events is about 200 MB, and a
small gzip can otherwise unpack to gigabytes before anything is parsed."""

MAX_JSON_DEPTH = 254
"""Deepest nesting accepted: orjson serialises at most this deep (then raises), so every document read
can be written again, and the recursive readers downstream (schema validation, redaction) stay
far below Python's recursion limit. A profile nests about 6 levels, plus 2 per level of region tree."""

_TOO_BIG_FIX = "capture fewer runs, or keep the trace uncompressed to inspect it"


def save(doc: ProfileDoc, path: str | Path) -> Path:
    """Write ``doc`` as indented JSON (orjson); refuses a document that does not validate.

    NaN and Infinity can never be written: the schema only admits finite numbers.
    """
    problems = validate(doc)
    if problems:
        raise ProfileError(f"refusing to write an invalid profile to {path}: {problems[0]}")
    return write_atomic(path, dumps(doc))


def write_atomic(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file beside it and a rename: never half a file.

    A full disk or a folder where the file should go leaves the old file (or none) and raises
    `OutputError`, one sentence naming the path and the fix.
    """
    with written_atomically(path) as temporary:
        temporary.write_bytes(data)
    return Path(path)


@contextlib.contextmanager
def written_atomically(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` for a writer to fill: renamed onto ``path`` when the block ends,
    removed when it raises, so ``path`` is never half a file and an old one survives a failure.

    The temporary name ends like ``path`` (``.json.gz``), for writers that pick a format by the
    suffix. An `OSError` in the block (a full disk, a folder in the way) becomes `OutputError`.
    """
    target = Path(path)
    temporary = target.with_name(f".partial-{os.getpid()}-{target.name}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        yield temporary
        os.replace(temporary, target)
    except OSError as error:
        raise OutputError(cannot_write(target, error)) from None
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)


TRACE_GZIP_LEVEL = 3
"""zlib level of the gzipped traces aitune writes. On a 21 MB trace of 88,540 events it took 0.12 s of
CPU for 1.81 MB; level 9 (gzip's default) 0.85 s for 1.50 MB, and torch's own export to ``.gz``, which
copies the JSON into a level-9 stream line by line, 4.4 s."""


def gzipped(data: bytes) -> bytes:
    """``data`` gzipped at `TRACE_GZIP_LEVEL`, with no timestamp in the header (the same bytes each time)."""
    return gzip.compress(data, compresslevel=TRACE_GZIP_LEVEL, mtime=0)


_WRITE_FIXES = {
    errno.ENOSPC: "the disk is full: free some space or write to another disk",
    errno.EFBIG: "the file is over this process's size limit (ulimit -f): raise it or write less",
    errno.EISDIR: "a folder is in the way: remove it or choose another path",
    errno.ENOTDIR: "part of the path is a file, not a folder: choose another path",
    errno.EEXIST: "part of the path is a file, not a folder: choose another path",
    errno.EACCES: "no permission: choose a writable path",
    errno.EPERM: "no permission: choose a writable path",
    errno.EROFS: "the file system is read-only: choose a writable path",
}


def cannot_write(path: str | Path, error: OSError) -> str:
    """The sentence for an `OSError` while writing ``path``: what happened and what to do."""
    fix = _WRITE_FIXES.get(error.errno or 0, "choose a writable path")
    return f"cannot write {path} ({error.strerror or error}); {fix}."


def dumps(doc: Any) -> bytes:
    """The canonical bytes of a document: orjson, two-space indent, trailing newline."""
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


def read_json(path: str | Path, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """Parse a JSON file, gunzipping it first when it is gzipped; `ProfileError` names the file.

    Bounded like `parse_json`: at most ``max_bytes`` of JSON and `MAX_JSON_DEPTH` levels of nesting.
    """
    return parse_json(_read_bytes(Path(path), max_bytes), str(path), max_bytes)


def read_trace_file_events(path: str | Path) -> TraceEvents:
    """The events of the Chrome trace file at ``path`` (plain or gzipped), read by the typed fast path
    (`aitune.analysis.trace_json`) with `read_json`'s bounds; `ProfileError` names the file."""
    name = str(path)
    data = unpacked(_read_bytes(Path(path), MAX_JSON_BYTES), name)
    return trace_events_from_json(data, name, lambda json: parse_json(json, name))


def _read_bytes(source: Path, max_bytes: int) -> bytes:
    try:
        if source.is_dir():
            raise ProfileError(f"{source} is a folder; name the profile.json (or trace) inside it.")
        if source.stat().st_size > max_bytes:
            raise ProfileError(_too_big(str(source), source.stat().st_size, max_bytes, _TOO_BIG_FIX))
        return source.read_bytes()
    except FileNotFoundError:
        raise ProfileError(f"{source}: no such file; check the path.") from None
    except OSError as error:
        raise ProfileError(f"{source}: cannot be read ({error.strerror}); check its permissions.") from None


def parse_json(data: bytes, name: str, max_bytes: int = MAX_JSON_BYTES, fix: str = _TOO_BIG_FIX) -> Any:
    """Parse JSON bytes, gunzipped first when gzipped: the one reader of the command line and the viewer.

    Untrusted input is bounded: `ProfileError` naming ``name`` when the JSON is (or unpacks to) more
    than ``max_bytes``, nests deeper than `MAX_JSON_DEPTH`, or is not JSON; ``fix`` says what to do
    about a file that is too big.
    """
    data = unpacked(data, name, max_bytes, fix)
    try:
        with gc_paused():
            value = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        if "depth limit" in str(error):
            raise ProfileError(_too_deep(name)) from None
        raise ProfileError(f"{name}: not valid JSON ({error}).") from None
    try:  # orjson's writer stops at its depth limit in C: a depth check ~15× cheaper than a walk in Python
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        raise ProfileError(_too_deep(name)) from None
    return value


def unpacked(data: bytes, name: str, max_bytes: int = MAX_JSON_BYTES, fix: str = _TOO_BIG_FIX) -> bytes:
    """``data`` gunzipped when it is gzipped; `ProfileError` naming ``name`` when it is (or unpacks to)
    more than ``max_bytes``, or is a truncated or corrupt gzip; ``fix`` says what to do about a file too big."""
    if len(data) > max_bytes:
        raise ProfileError(_too_big(name, len(data), max_bytes, fix))
    if data[:2] != _GZIP_MAGIC:
        return data
    # Read one byte past the limit: a small gzip may unpack to gigabytes.
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
            expanded = stream.read(max_bytes + 1)
    except (EOFError, OSError, zlib.error):
        raise ProfileError(f"{name}: the gzip data is truncated or corrupt; copy the file again.") from None
    if len(expanded) > max_bytes:
        raise ProfileError(_too_big(name, len(expanded), max_bytes, fix, verb="unpacks to at least"))
    return expanded


def _too_big(name: str, size: int, limit: int, fix: str, verb: str = "is") -> str:
    return f"{name} {verb} {size / 2**20:.0f} MB, over the {limit // 2**20} MB limit; {fix}."


def _too_deep(name: str) -> str:
    return f"{name}: JSON nested deeper than {MAX_JSON_DEPTH} levels is refused; no profile or trace nests that deep."


def load(path: str | Path) -> ProfileDoc:
    """Read and validate a profile document, ours or AITune's; `ProfileError` names the file and the field."""
    raw = read_json(path)
    check_profile_header(raw, path)
    problems = validate(raw)
    if problems:
        more = f" (and {len(problems) - 1} more: `aitune-profile validate {path}` lists all)" if problems[1:] else ""
        raise ProfileError(f"{path}: {problems[0]}{more}")
    return raw


def check_profile_header(raw: Any, path: str | Path) -> None:
    """`ProfileError` unless ``raw`` looks like a profile document of a schema version this aitune reads."""
    if not isinstance(raw, dict) or "schema_version" not in raw or "runs" not in raw:
        raise ProfileError(f"{path}: not a profile document (no schema_version and runs keys).")
    version = raw["schema_version"]
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise ProfileError(
            f"{path}: schema_version {version} is newer than this aitune reads ({SCHEMA_VERSION}); upgrade aitune."
        )


def read_trace(path: str | Path) -> dict[str, Any]:
    """Read a Chrome trace (plain or gzipped); `ProfileError` when it is not one."""
    return check_trace(read_json(path), str(path))
