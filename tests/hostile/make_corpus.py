"""Write the hostile corpus next to this script: profiles and traces a stranger could send.

Run ``python tests/hostile/make_corpus.py`` from the repository root to regenerate it; every file is
derived from one small hand-built trace, so the corpus stays a few kilobytes.
"""

from __future__ import annotations

import copy
import gzip
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent)]

from builders import decoder_trace  # noqa: E402

from aitune.report import build_profile, dumps  # noqa: E402

HOSTILE_NAMES = {
    "markup-close": "a[/b]",
    "markup-link": "[link=https://evil.example]click[/link]",
    "brackets": "experts[gate]",
    "escapes": "\x1b[2J\x1b]0;pwned\x07\x1b[32mOK\x1b[0m",
    "html-newline": "<script>alert(1)</script>\n## injected | cell",
    "zero-width": "lm\u200b_he\u200dad\ufeff",
}
"""Region names that must reach every output as plain, visible text (the zero-width one reads as ``lm_head``)."""

OPERATOR_KEY = "<img src=x onerror=\"document.title='X'\">"
"""An extra key (and value) on every operator row: valid (rows may carry keys of their own), and a viewer
that lists a row's keys as its columns puts it in a column title."""

MALFORMED_EVENTS = {
    "non-object-event": 5,
    "string-ts": {"ph": "X", "name": "a", "ts": "soon"},
    "list-name": {"ph": "X", "name": ["a"], "ts": 1},
    "string-args": {"ph": "X", "name": "a", "ts": 1, "args": "zz"},
    "bad-correlation": {"ph": "X", "name": "k", "cat": "kernel", "ts": 1, "args": {"correlation": "x"}},
}


def _renamed(value, old: str, new: str):
    if isinstance(value, dict):
        return {_renamed(key, old, new): _renamed(item, old, new) for key, item in value.items()}
    if isinstance(value, list):
        return [_renamed(item, old, new) for item in value]
    return value.replace(old, new) if isinstance(value, str) else value


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def corpus() -> dict[str, bytes]:
    """File name → bytes of every case."""
    trace = decoder_trace()
    profile = build_profile(copy.deepcopy(trace))
    files: dict[str, bytes] = {}
    for case, name in HOSTILE_NAMES.items():
        hostile = _renamed(profile, "lm_head", name)
        hostile["warnings"] = [{"code": "HOSTILE", "source": name, "message": f"message with {name}"}]
        files[f"name-{case}.profile.json"] = dumps(hostile)
    extra_key = copy.deepcopy(profile)
    for rows in extra_key["profiler"]["key_averages"].values():
        for row in rows:
            row[OPERATOR_KEY] = OPERATOR_KEY
    files["operator-key-html.profile.json"] = dumps(extra_key)
    deep = dumps({**profile, "extra": None}).replace(b'"extra": null', b'"extra": ' + _nested(1000))
    files["deep-1000.profile.json"] = deep
    files["schema-version-float.profile.json"] = dumps({**profile, "schema_version": 1.0})
    for case, event in MALFORMED_EVENTS.items():
        files[f"{case}.trace.json"] = dumps({**trace, "traceEvents": [*trace["traceEvents"], event]})
    files["metadata-list.trace.json"] = dumps({**trace, "aitune": [1, 2]})
    files["deep-1000.trace.json"] = dumps({**trace, "aitune": None}).replace(
        b'"aitune": null', b'"aitune": {"deep": ' + _nested(1000) + b"}"
    )
    files["not-an-object.trace.json"] = b"[1, 2]\n"
    files["not-json.trace.json"] = b"{not json\n"
    files["truncated-gzip.trace.json"] = gzip.compress(dumps(trace), mtime=0)[:-8]
    return files


def main() -> None:
    for name, data in corpus().items():
        (HERE / name).write_bytes(data)


if __name__ == "__main__":
    main()
