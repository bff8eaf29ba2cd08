"""Reading and writing profile documents and Chrome traces (plain or gzipped), with one clear error each."""

from __future__ import annotations

import contextlib
import errno
import gzip
import os
import secrets
import shutil
import stat
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import orjson

from aitune.analysis.gc_pause import gc_paused
from aitune.analysis.trace_checks import check_trace
from aitune.errors import OutputError, ProfileError
from aitune.report.document import ProfileDoc
from aitune.report.invariants import profile_problems
from aitune.report.model import SCHEMA_VERSION, Profile
from aitune.report.ranks import check_ranks
from aitune.report.validate import decode_profile, refused_problems, validate

if TYPE_CHECKING:
    from aitune.analysis.events import TraceEvents

_GZIP_MAGIC = b"\x1f\x8b"

MAX_JSON_BYTES = 1024 * 2**20
"""Largest JSON (after gunzip) the command line reads: a trace of 10⁶ events is about 200 MB, and a
small gzip can otherwise unpack to gigabytes before anything is parsed."""

MAX_JSON_DEPTH = 254
"""Deepest nesting accepted: orjson serialises at most this deep (then raises), so every document read
can be written again, and the recursive readers downstream (schema validation, redaction) stay
far below Python's recursion limit. A profile nests about 6 levels, plus 2 per level of region tree."""

MAX_JSON_ITEMS = 10_000_000
"""Most values (an upper bound: commas, ``[`` and ``{``, counted in C before parsing) a JSON document
may hold. Parsed, a value costs 8 to 200 bytes (a pointer to a shared small integer, a dict), so a
bound on their count bounds memory where the byte limit alone would not: ``[0,0,…]`` costs 4× its
size, ``[{},{},…]`` 24×. A torch trace of 10⁶ events holds about 7·10⁶ (one per 29 bytes of JSON)."""

MAX_PROFILE_ITEMS = 2_000_000
"""`MAX_JSON_ITEMS` for a profile document: one of 185 KB holds 3,200 values, a merged one of 64
ranks × 100 runs × 50 regions about 3·10⁵."""

MAX_GZIP_RATIO = 40
"""Most a gzipped file may unpack to, as a multiple of its own size (beyond `GZIP_FREE_BYTES`): profiles
and traces compress 9× to 15× (a 185 KB profile to 21 KB, a 1.7 MB trace to 118 KB), while a gzip bomb
compresses 1000× (a 198 KB file holding a 10⁸-element array)."""

GZIP_FREE_BYTES = 16 * 2**20
"""Unpacked bytes any gzipped file may reach, whatever its ratio: a small file costs little however
well it compresses."""

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

    A full disk, a folder where the file should go, or a path that is no regular file (a device such
    as ``/dev/null``, a pipe) leaves the old file (or none) and raises `OutputError`, one sentence
    naming the path and the fix.
    """
    with written_atomically(path) as temporary:
        write_new_file(temporary, data)
    return Path(path)


@contextlib.contextmanager
def written_atomically(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` for a writer to fill: renamed onto ``path`` when the block ends,
    removed when it raises, so ``path`` is never half a file and an old one survives a failure.

    The temporary file lies in a folder of its own beside ``path``, made exclusively with an
    unpredictable name and mode 0700 (`private_folder_beside`): no link planted in the output folder
    can redirect the write, and nobody else can plant one in that folder. The temporary name ends
    like ``path`` (``.json.gz``), for writers that pick a format by the suffix. An `OSError` in the
    block (a full disk, a folder in the way) becomes `OutputError`.
    """
    target = Path(path)
    if target.exists() and not target.is_file() and not target.is_dir():  # a rename as root would replace /dev/null
        raise OutputError(f"{target} is not a regular file (a device or a pipe); name a file instead.")
    folder: Path | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        folder = private_folder_beside(target)
        temporary = folder / target.name
        yield temporary
        os.replace(temporary, target)
    except OSError as error:
        raise OutputError(cannot_write(target, error)) from None
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def private_folder_beside(target: Path) -> Path:
    """A new folder beside ``target``, ``.partial-<random>``, made by this call alone (mode 0700).

    ``mkdir`` fails on any existing name, link or not, so the folder is ours; its name is 96 random bits.
    """
    while True:
        folder = target.with_name(f".partial-{secrets.token_hex(12)}")
        try:
            os.mkdir(folder, 0o700)
            return folder
        except FileExistsError:  # pragma: no cover - 2⁹⁶ names
            continue


def write_new_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path``, which must not exist: created exclusively, never through a link."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(descriptor, "wb") as stream:
        stream.write(data)


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


def read_json(path: str | Path, max_bytes: int = MAX_JSON_BYTES, max_items: int = MAX_JSON_ITEMS) -> Any:
    """Parse a JSON file, gunzipping it first when it is gzipped; `ProfileError` names the file.

    Read through `read_regular`, bounded like `parse_json`: at most ``max_bytes`` of JSON, ``max_items``
    values and `MAX_JSON_DEPTH` levels of nesting.
    """
    return parse_json(read_regular(path, max_bytes), str(path), max_bytes, max_items=max_items)


def read_trace_file_events(path: str | Path) -> TraceEvents:
    """The events of the Chrome trace file at ``path`` (plain or gzipped), read by the typed fast path
    (`aitune.analysis.trace_json`) with `read_json`'s bounds; `ProfileError` names the file. A trace this
    process is still writing in the background (`aitune.report.trace_writes`) is waited for first."""
    from aitune.analysis.trace_json import trace_events_from_json  # here: reading a document needs no trace reader
    from aitune.report.trace_writes import wait_for_traces

    wait_for_traces(path)
    name = str(path)
    return trace_events_from_json(
        lambda: unpacked(read_regular(path, MAX_JSON_BYTES), name), name, lambda json: parse_json(json, name)
    )


_FILE_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)


def _kind(mode: int) -> str:
    return next((words for test, words in _FILE_KINDS if test(mode)), "not a regular file")


_READ_CHUNK = 1 << 20


def read_regular(
    path: str | Path,
    max_bytes: int = MAX_JSON_BYTES,
    fix: str = _TOO_BIG_FIX,
    name: str | None = None,
    whose: str = "the",
) -> bytes:
    """The bytes of the regular file at ``path``, at most ``max_bytes``: the one door every file aitune
    reads from a user (profiles, traces, plans, rank folders, reports) goes through.

    A FIFO, a device (``/dev/zero``), a socket or a folder, also behind a link, is refused by its type
    before it is opened, so nothing blocks or reads without end; the file is opened non-blocking and
    its type checked again on the open descriptor (it may have been swapped in between), and the read
    stops one byte past ``max_bytes`` whatever the size said. `ProfileError`, one sentence naming ``path``
    (or ``name``, how the caller shows it); ``whose`` names the limit's owner ("the viewer's").
    """
    source = Path(path)
    shown = name or str(source)
    try:
        mode = os.stat(source).st_mode
        if not stat.S_ISREG(mode):
            raise ProfileError(_not_regular(shown, mode))
        descriptor = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(descriptor, "rb", buffering=0) as stream:
            opened = os.fstat(descriptor)
            if not stat.S_ISREG(opened.st_mode):
                raise ProfileError(_not_regular(shown, opened.st_mode))
            if opened.st_size > max_bytes:
                raise ProfileError(_too_big(shown, opened.st_size, max_bytes, fix, whose=whose))
            # Sized by the file, not by the limit: a read of max_bytes + 1 would allocate the whole limit.
            data = stream.read(min(opened.st_size, max_bytes) + 1)
            while opened.st_size < len(data) <= max_bytes:  # it grew: read on in chunks, stopping past the limit
                more = stream.read(min(_READ_CHUNK, max_bytes + 1 - len(data)))
                if not more:
                    break
                data += more
    except FileNotFoundError:
        raise ProfileError(f"{shown}: no such file; check the path.") from None
    except OSError as error:
        raise ProfileError(f"{shown}: cannot be read ({error.strerror or error}); check its permissions.") from None
    except ValueError as error:  # a NUL byte in the name
        raise ProfileError(f"{shown}: cannot be a file name ({error}); check the path.") from None
    if len(data) > max_bytes:  # it grew while read
        raise ProfileError(_too_big(shown, len(data), max_bytes, fix, verb="grew to at least", whose=whose))
    return data


def _not_regular(source: str, mode: int) -> str:
    if stat.S_ISDIR(mode):
        return f"{source} is a folder; name the profile.json (or trace) inside it."
    return f"{source} is {_kind(mode)}, not a regular file; copy the data into a file and pass that file."


def parse_json(
    data: bytes,
    name: str,
    max_bytes: int = MAX_JSON_BYTES,
    fix: str = _TOO_BIG_FIX,
    max_items: int = MAX_JSON_ITEMS,
    max_depth: int = MAX_JSON_DEPTH,
) -> Any:
    """Parse JSON bytes, gunzipped first when gzipped: the one reader of the command line and the viewer.

    Untrusted input is bounded: `ProfileError` naming ``name`` when the JSON is (or unpacks to) more
    than ``max_bytes`` (or more than `MAX_GZIP_RATIO` × its gzipped size), holds more than
    ``max_items`` values (counted before any is built), nests deeper than ``max_depth`` (at most
    `MAX_JSON_DEPTH`, orjson's own limit), or is not JSON; ``fix`` says what to do about a file that is too big.
    """
    data = unpacked(data, name, max_bytes, fix)
    check_item_count(data, name, max_items, fix)
    try:
        with gc_paused():
            value = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        if "depth limit" in str(error):
            raise ProfileError(_too_deep(name, max_depth)) from None
        raise ProfileError(f"{name}: not valid JSON ({error}).") from None
    try:  # orjson's writer stops at its depth limit in C: a depth check ~15× cheaper than a walk in Python
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        raise ProfileError(_too_deep(name, max_depth)) from None
    if max_depth < MAX_JSON_DEPTH and nesting_depth(value, max_depth) > max_depth:
        raise ProfileError(_too_deep(name, max_depth))
    return value


def nesting_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """How deep lists and dicts nest in ``value`` (a scalar is 0), computed without recursion; the walk
    stops at the first container deeper than ``limit``."""
    deepest = 0
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        if depth > limit:
            return depth
        pending.extend((child, depth + 1) for child in children)
    return deepest


def check_item_count(data: bytes, name: str, max_items: int, fix: str = _TOO_BIG_FIX) -> None:
    """`ProfileError` naming ``name`` when the JSON ``data`` may hold more than ``max_items`` values.

    The count is an upper bound (a comma inside a string counts too), found by C-level byte counts
    before anything is parsed: a document's memory is then bounded before it is built.
    """
    items = data.count(b",") + data.count(b"[") + data.count(b"{")
    if items > max_items:
        raise ProfileError(
            f"{name} holds up to {items:,} JSON values, over the limit of {max_items:,} (a parsed value takes "
            f"up to 200 bytes); {fix}."
        )


def unpacked(data: bytes, name: str, max_bytes: int = MAX_JSON_BYTES, fix: str = _TOO_BIG_FIX) -> bytes:
    """``data`` gunzipped when it is gzipped; `ProfileError` naming ``name`` when it is (or unpacks to)
    more than ``max_bytes``, or unpacks past `MAX_GZIP_RATIO` × its size (a gzip bomb), or is a
    truncated or corrupt gzip; ``fix`` says what to do about a file too big."""
    if len(data) > max_bytes:
        raise ProfileError(_too_big(name, len(data), max_bytes, fix))
    if data[:2] != _GZIP_MAGIC:
        return data
    ratio_limit = GZIP_FREE_BYTES + MAX_GZIP_RATIO * len(data)
    limit = min(max_bytes, ratio_limit)
    try:
        expanded = _gunzipped(data, limit + 1)  # one byte past the limit: a small gzip may unpack to gigabytes
    except (EOFError, zlib.error):
        raise ProfileError(f"{name}: the gzip data is truncated or corrupt; copy the file again.") from None
    if len(expanded) > limit:
        if limit == max_bytes:
            raise ProfileError(_too_big(name, len(expanded), max_bytes, fix, verb="unpacks to at least"))
        raise ProfileError(
            f"{name} unpacks to more than {MAX_GZIP_RATIO}× its {_size(len(data))} (at least {_size(len(expanded))}), "
            "far more than any profile or trace compresses; refused as a likely gzip bomb — unpack it yourself "
            "only if you trust it."
        )
    return expanded


def _gunzipped(data: bytes, most: int) -> bytes:
    """Every gzip member of ``data`` unpacked, at most ``most`` bytes of them. One C-level call per member
    grows its output as it goes: a buffered reader would allocate ``most`` bytes up front."""
    parts: list[bytes] = []
    room = most
    while data and room > 0:
        member = zlib.decompressobj(wbits=31)  # 31: a gzip header and trailer around the deflate stream
        parts.append(member.decompress(data, room))
        room -= len(parts[-1])
        if member.unconsumed_tail:  # stopped at ``most``: past the limit, which is all the caller asks
            break
        if not member.eof:
            raise EOFError("a gzip member ends before its trailer")
        data = member.unused_data
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _size(count: int) -> str:
    return f"{count / 2**20:.0f} MB" if count >= 2**20 else f"{count / 2**10:.0f} KB"


def _too_big(name: str, size: int, limit: int, fix: str, verb: str = "is", whose: str = "the") -> str:
    return f"{name} {verb} {size / 2**20:.0f} MB, over {whose} {limit // 2**20} MB limit; {fix}."


def _too_deep(name: str, limit: int = MAX_JSON_DEPTH) -> str:
    return f"{name}: JSON nested deeper than {limit} levels is refused; no profile or trace nests that deep."


def load(path: str | Path) -> Profile:
    """The profile document of the file at ``path``, ours or AITune's, as the typed record every reader reads
    (`aitune.report.model.json_form` gives its JSON data back); `ProfileError` names the file and the field."""
    name = str(path)
    return checked_profile_json(unpacked(read_regular(path, MAX_JSON_BYTES), name), name)


def checked_profile_json(
    data: bytes, name: str, hint: bool = True, parse: Callable[[bytes], Any] | None = None
) -> Profile:
    """The profile document the JSON ``data`` holds, as the typed record, when it is valid; `ProfileError`
    naming ``name`` otherwise (see `checked_profile`).

    The everyday case is one typed decode, which checks the document while it parses it, and the
    invariants on the typed record; a document the model refuses is parsed again by ``parse`` (default:
    `parse_json`, bounded for a profile) to say why.
    """
    check_item_count(data, name, MAX_PROFILE_ITEMS)
    try:
        profile = decode_profile(data)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        raw = parse(data) if parse is not None else parse_json(data, name, max_items=MAX_PROFILE_ITEMS)
        return checked_profile(raw, name, hint)
    return _checked(profile, profile_problems(profile), name, hint)


def checked_profile(raw: Any, name: str, hint: bool = True) -> Profile:
    """``raw`` as the typed record (keys the model does not name left out), when it is a valid profile document:
    header, types, and the cross-checks no type can say (a merged document's ranks,
    `aitune.report.ranks.check_ranks`); `ProfileError` naming ``name``.

    ``hint``: point at ``aitune-profile validate`` when there are more problems than the first.
    """
    check_profile_header(raw, name)
    try:
        profile = msgspec.convert(raw, Profile)
    except msgspec.ValidationError:
        return _checked(None, refused_problems(raw), name, hint)
    return _checked(profile, profile_problems(profile), name, hint)


def _checked(profile: Profile | None, problems: list[str], name: str, hint: bool) -> Profile:
    """``profile``, or `ProfileError` with the first of its ``problems``."""
    if profile is None and not problems:  # refused, though no field says why: still no profile
        problems = ["(document): not a profile document"]
    if problems or profile is None:
        more = (
            f" (and {len(problems) - 1} more: `aitune-profile validate {name}` lists all)"
            if problems[1:] and hint
            else ""
        )
        raise ProfileError(f"{name}: {problems[0]}{more}")
    check_ranks(profile, name)
    return profile


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
