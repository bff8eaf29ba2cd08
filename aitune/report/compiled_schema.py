"""The profile schema compiled to Python code by `fastjsonschema`, so a valid document is checked at parse speed.

Generating and compiling that code costs about 0.2 s, more than a whole ``aitune-profile report`` may
take, so its bytecode is written once per schema hash (and fastjsonschema and Python version) into a
private cache folder — ``$AITUNE_CACHE_DIR``, else ``$XDG_CACHE_HOME/aitune``, else ``~/.cache/aitune``
— and later loaded from there (as Python loads a ``.pyc``, whatever ``PYTHONDONTWRITEBYTECODE`` says).
A folder that cannot be written, or that another user could write, is not used: the schema is then
compiled in memory.

fastjsonschema speaks draft 7; the schema is written in draft 2020-12. `as_draft7` translates the one
keyword that differs in the schema (``dependentRequired`` → ``dependencies``); the import-budget and
validation tests check the two engines give the same verdict.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import marshal
import os
import stat
import sys
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

CACHE_ENV = "AITUNE_CACHE_DIR"
"""Where the compiled schema is kept; unset, the user's cache folder (``~/.cache/aitune``)."""


def accepts(schema_text: str, doc: Any) -> bool:
    """Whether ``doc`` satisfies the schema written in ``schema_text`` (no messages: see `validate`)."""
    from fastjsonschema import JsonSchemaException

    try:
        compiled(schema_text)(doc)
    except JsonSchemaException:
        return False
    return True


@cache
def compiled(schema_text: str) -> Callable[[Any], Any]:
    """The validating function for ``schema_text``: loaded from the cache, written there first if new."""
    import fastjsonschema

    key = f"{fastjsonschema.VERSION}\n{sys.implementation.cache_tag}\n{schema_text}"
    folder = cache_folder()
    if folder is None:
        return fastjsonschema.compile(as_draft7(json.loads(schema_text)))
    path = folder / f"profile_schema_{hashlib.sha256(key.encode()).hexdigest()[:20]}.bin"
    try:
        code = marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        source = fastjsonschema.compile_to_code(as_draft7(json.loads(schema_text)))
        code = compile(source, "<aitune profile schema>", "exec")
        with contextlib.suppress(OSError):
            _write_private(path, marshal.dumps(code))
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # code fastjsonschema generated from the package's own schema
    return namespace["validate"]


def as_draft7(schema: dict[str, Any]) -> dict[str, Any]:
    """The 2020-12 ``schema`` in the draft 7 words fastjsonschema reads; a copy, the input untouched."""
    schema = copy.deepcopy(schema)
    schema["$schema"] = "http://json-schema.org/draft-07/schema#"
    schema.pop("$id", None)  # the entry point is then named plain ``validate``
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "dependentRequired" in node:
                node["dependencies"] = node.pop("dependentRequired")
            stack += node.values()
        elif isinstance(node, list):
            stack += node
    return schema


def cache_folder() -> Path | None:
    """The private cache folder, created owner-only; None when it cannot be made or others can write it."""
    given = os.environ.get(CACHE_ENV)
    base = Path(given) if given else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "aitune"
    try:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        status = base.stat()
    except (OSError, RuntimeError):  # RuntimeError: no home folder to expand
        return None
    owned = not hasattr(os, "getuid") or status.st_uid == os.getuid()
    if not owned or status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return None  # code imported from a folder someone else can write is not ours
    return base


def _write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename, so a reader never sees half."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
