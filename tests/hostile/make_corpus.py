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
from documents import generate_doc, worked_doc  # noqa: E402

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


def _each_run(edit):
    """An edit of a document that applies ``edit(run)`` to each of its runs."""

    def edited(doc: dict) -> None:
        for run in doc["runs"]:
            edit(run)

    return edited


def _phases(run: dict, **values) -> None:
    for phase in run["phases"]:
        phase.update(values)


def _generation(run: dict, **values) -> None:
    run["generation"].update(values)


def _work(run: dict, **values) -> None:
    run["regions"][0]["work"].update(values)


INVARIANT_CASES = {
    "runs-none": (worked_doc, lambda doc: doc.update(runs=[])),
    "phases-dropped": (generate_doc, _each_run(lambda run: run.pop("phases"))),
    "phases-reordered": (generate_doc, _each_run(lambda run: run["phases"].reverse())),
    "phase-no-run-has": (generate_doc, lambda doc: doc["phase_split"]["phases"].insert(0, "encoder")),
    "phases-each-whole": (generate_doc, _each_run(lambda run: _phases(run, cpu_time_fraction=1.0))),
    "tokens-none-first-token-past-the-run": (
        generate_doc,
        _each_run(lambda run: _generation(run, output_tokens=0, ttft_us=1e9)),
    ),
    "first-token-1e300": (generate_doc, _each_run(lambda run: _generation(run, ttft_us=1e300))),
    "tokens-per-second-1e18": (generate_doc, _each_run(lambda run: _generation(run, tokens_per_second=1e18))),
    "flops-300-digits": (worked_doc, _each_run(lambda run: _work(run, flops=1e300))),
    "flops-overflow": (
        worked_doc,
        _each_run(lambda run: _work(run, flops=1.7e308, flops_by_dtype={"float32": 1.7e308})),
    ),
    "counted-time-subnormal": (worked_doc, _each_run(lambda run: _work(run, counted_cpu_time_us=5e-324))),
    "region-time-overflow": (
        lambda: build_profile(decoder_trace()),
        _each_run(lambda run: run["regions"][0].update(cpu_time_us=1.7e308)),
    ),
}
"""Documents the schema accepts whose figures no capture makes: (a valid document, the edit made to it on purpose)."""


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
    for case, (make, edit) in INVARIANT_CASES.items():
        doc = make()
        edit(doc)
        files[f"invariant-{case}.profile.json"] = dumps(doc)
    files["not-an-object.trace.json"] = b"[1, 2]\n"
    files["not-json.trace.json"] = b"{not json\n"
    files["truncated-gzip.trace.json"] = gzip.compress(dumps(trace), mtime=0)[:-8]
    return files


def main() -> None:
    for name, data in corpus().items():
        (HERE / name).write_bytes(data)


if __name__ == "__main__":
    main()
