"""Reading and writing profile documents and Chrome traces (plain or gzipped), with one clear error each."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import Any

import orjson

from aitune.errors import ProfileError
from aitune.report.document import SCHEMA_VERSION, ProfileDoc
from aitune.report.validate import validate

_GZIP_MAGIC = b"\x1f\x8b"


def save(doc: ProfileDoc, path: str | Path) -> Path:
    """Write ``doc`` as indented JSON (orjson); refuses a document that does not validate.

    NaN and Infinity can never be written: the schema only admits finite numbers.
    """
    problems = validate(doc)
    if problems:
        raise ProfileError(f"refusing to write an invalid profile to {path}: {problems[0]}")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(dumps(doc))
    return target


def dumps(doc: Any) -> bytes:
    """The canonical bytes of a document: orjson, two-space indent, trailing newline."""
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


def read_json(path: str | Path) -> Any:
    """Parse a JSON file, gunzipping it first when it is gzipped; `ProfileError` names the file."""
    source = Path(path)
    try:
        data = source.read_bytes()
    except FileNotFoundError:
        raise ProfileError(f"{source}: no such file; check the path.") from None
    except OSError as error:
        raise ProfileError(f"{source}: cannot be read ({error.strerror}).") from None
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (EOFError, OSError, zlib.error):
            raise ProfileError(f"{source}: the gzip data is truncated or corrupt; copy the file again.") from None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise ProfileError(f"{source}: not valid JSON ({error}).") from None


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
    trace = read_json(path)
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise ProfileError(f"{path}: not a Chrome trace (no traceEvents list).")
    return trace
