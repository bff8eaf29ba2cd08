"""Readers take the typed record: the profile document is read by attribute, never by string key.

A reader moves through one door, `aitune.report.model.as_profile` (the record itself, or a dict converted once
per `computed_once` block), then reads fields (``run.timing.cpu_time_us``, `time_in(record, domain)` for a
domain's figure). No module of the reading stages (`READING_STAGES`, and the history's readers of a profile,
`READERS_ELSEWHERE`) may index a dict by a string key, ``.get`` one or test one with ``in``. The few functions
whose string-key reads read no document (a Chrome trace torch writes, the environment, a command line) are
named in `READS_NO_DOCUMENT`, each with why, and only they are left out.
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from pathlib import Path

import msgspec
import pytest
from documents import pipeline_doc

from aitune.errors import ProfileError
from aitune.report.memo import computed_once
from aitune.report.model import Environment, Profile, as_profile, fraction_in, given, time_in

PACKAGE = Path(__file__).resolve().parent.parent / "aitune"

READING_STAGES = ("report", "compare", "suggest", "viewer", "cli")
"""The folders whose modules read profile documents (and the reports beside them)."""
READERS_ELSEWHERE = ("history/gate.py", "history/outcomes.py", "history/record.py", "history/sources.py")
"""The history's readers of a profile (relative to ``aitune/``); the rest of it reads its own database rows."""
NOT_READERS = {
    "report/builder.py",  # writes the document from a trace
    "report/model.py",  # the one definition
    "report/invariants.py",
    "report/validate.py",
    "report/problems.py",
    "report/io.py",
    "compare/report_model.py",
    "suggest/report_model.py",
    "suggest/reasons.py",  # reads suggest's own records (an operator mix by category), never a document
    "suggest/precision.py",  # the CPU's flags and an operator mix
}
"""The model's own modules, the door that checks a file against it, and the writer."""

READS_NO_DOCUMENT: dict[str, dict[str, str]] = {
    "cli/capture.py": {"capture_target": "a command line's target, `app.py:infer`: a ':' in a string"},
    "cli/console.py": {"_console": "the process environment's COLUMNS"},
    "cli/edge.py": {"run": "a command's keyword arguments, as Typer passes them (--debug)"},
    "compare/loop_report.py": {
        "_holds_tuned_regions": "the raw JSON's header probe before the typed read, as `io.check_profile_header` is"
    },
    "suggest/forecast.py": {
        "_holds_targets": "the raw JSON's header probe before the typed read, as `io.check_profile_header` is"
    },
    "report/bundle.py": {
        "_trace_hosts": "a Chrome trace's host_name: torch's format, redacted whole, never read into aitune's model",
        "_without_saved_path": "a Chrome trace's traceName, torch's too",
    },
    "report/cache.py": {"cache_root": "the process environment's AITUNE_CACHE_DIR"},
    "viewer/sources.py": {"list_profiles": "a file name holding 'trace': a trace's name, no document"},
}
"""Functions of the reading stages (by module) whose string-key reads read no document, each with why: the scan
leaves them out, and only them."""


def string_key_reads(source: str, outside: Collection[str] = ()) -> list[int]:
    """The lines of ``source`` that index by a string constant, ``.get`` one or test membership of one, but for
    those in the functions named in ``outside``."""
    tree = ast.parse(source)
    left_out = {
        id(node)
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef) and function.name in outside
        for node in ast.walk(function)
    }
    return sorted(node.lineno for node in ast.walk(tree) if id(node) not in left_out and _reads_by_string_key(node))


def module_reads(module: str) -> list[int]:
    """The string-key reads of ``module`` (relative to ``aitune/``) but for its functions that read no document."""
    return string_key_reads((PACKAGE / module).read_text(encoding="utf-8"), READS_NO_DOCUMENT.get(module, {}))


def _reads_by_string_key(node: ast.AST) -> bool:
    if isinstance(node, ast.Subscript):
        return _is_text(node.slice)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and _is_text(node.args[0])
    if isinstance(node, ast.Compare):
        return _is_text(node.left) and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops)
    return False


def _is_text(node: ast.expr) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, str)) or isinstance(node, ast.JoinedStr)


def _reading_modules() -> list[str]:
    modules = [path for stage in READING_STAGES for path in sorted((PACKAGE / stage).rglob("*.py"))]
    return [name for path in modules if (name := path.relative_to(PACKAGE).as_posix()) not in NOT_READERS]


def test_the_scan_finds_each_kind_of_string_key_read():
    source = 'a = doc["runs"]\nb = run.get("timing")\nc = f"{d}_time_us" in timing\nd = run.timing.cpu_time_us\n'
    assert string_key_reads(source) == [1, 2, 3]


def test_the_scan_leaves_out_only_the_functions_named():
    source = 'def host(trace):\n    return trace["host_name"]\n\n\ndef runs(doc):\n    return doc["runs"]\n'
    assert string_key_reads(source, {"host"}) == [6]


def test_each_function_said_to_read_no_document_is_there_and_reads_by_string_key():
    for module, functions in READS_NO_DOCUMENT.items():
        source = (PACKAGE / module).read_text(encoding="utf-8")
        for function in functions:
            assert string_key_reads(source, {function}) != string_key_reads(source), (module, function)


def test_no_reader_reads_a_document_by_string_key():
    readers = [*_reading_modules(), *READERS_ELSEWHERE]
    offending = {module: module_reads(module) for module in readers}
    assert {module: lines for module, lines in offending.items() if lines} == {}, (
        "read the typed record (`aitune.report.model.as_profile`) by attribute instead"
    )


def test_the_door_converts_a_document_once_per_block_and_passes_a_record_through():
    doc = pipeline_doc(unet_us=400.0)
    record = as_profile(doc)
    assert isinstance(record, Profile) and as_profile(record) is record
    assert as_profile(doc) is not record  # outside a block every reader converts afresh (tests edit documents)
    with computed_once():
        assert as_profile(doc) is as_profile(doc)
    with pytest.raises(ProfileError, match=r"not a valid profile document: .*\$\.runs\[0\]"):
        as_profile({**doc, "runs": [{"run_index": -1}]})


def test_a_domain_figure_is_read_by_name_and_absent_device_time_is_none():
    run = as_profile(pipeline_doc(unet_us=400.0)).runs[0]
    assert time_in(run.timing, "cpu") == run.timing.cpu_time_us > 0
    assert time_in(run.timing, "device") is None
    region = run.regions[0]
    assert fraction_in(region, "cpu") == region.cpu_time_fraction and fraction_in(region, "device") is None
    assert given(run.timing.device_time_us, 0.0) == 0.0


def test_a_live_capture_s_environment_goes_through_the_record_and_back_to_json():
    torch = pytest.importorskip("torch")
    from aitune.torch.performance.environment import environment

    record = msgspec.convert(environment(), Environment)  # as every reader takes an in-memory capture's

    assert msgspec.json.decode(msgspec.json.encode(record))["torch"] == str(torch.__version__)
