"""The import budget of ``aitune-profile``, by module, not by clock: each command imports what it uses.

Start-up time is mostly imports, and a wall-clock limit would fail on a busy machine; which modules a
command loads is the same on every machine. Each command runs in a fresh interpreter, and the test
reads that interpreter's ``sys.modules`` after it. ``benchmarks/startup.py`` gives the seconds.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import orjson
import pytest

from aitune.report.model import Profile
from aitune.report.problems import problems_in
from aitune.report.validate import validate

ROOT = Path(__file__).resolve().parent.parent
BEFORE = ROOT / "sample_traces" / "tuned-pipeline" / "before" / "profile.json"
AFTER = ROOT / "sample_traces" / "tuned-pipeline" / "after" / "profile.json"

NEVER = (
    *("torch", "panel", "bokeh", "pandas", "scipy", "transformers"),
    *("pydantic", "rich.markdown", "markdown_it", "pygments", "rich.traceback"),
    *("sqlalchemy", "psycopg", "aitune.history"),
)
"""Modules no torch-free command loads: torch, the thorough (slow-to-import) schema engine, the viewer's
stack; pydantic (Typer 0.29 builds a pydantic adapter per option), and what Typer's rich help and
rich tracebacks import (a Markdown parser, Pygments); the history's database layer, which only ``history`` loads."""

READER_NEVER = (*NEVER, "numpy", "aitune.analysis.events", "aitune.report.builder", "aitune.compare")
"""``report``, ``validate`` and ``suggest`` read one document: no trace analysis, no numpy (only
``compare``'s bootstrap intervals need it)."""

COMPARE_NEVER = (*NEVER, "aitune.suggest", "aitune.analysis.events", "aitune.report.builder")
"""``compare`` of two profiles diffs them and draws the table: no gain model, no trace analysis."""

HELP_NEVER = (*READER_NEVER, "rich", "orjson", "msgspec", "aitune.analysis", "aitune.report", "aitune.suggest")
"""``--help`` parses no document: nothing that reads, checks, analyses or draws one."""

_RUN = """
import json, sys
sys.argv = ["aitune-profile", *json.loads(sys.argv[1])]
from aitune.cli import main
code = 0
try:
    main()
except SystemExit as exit:
    code = exit.code
with open({out!r}, "w") as file:
    json.dump({{"code": code, "modules": sorted(sys.modules)}}, file)
"""


def modules_of(tmp_path: Path, *args: str) -> tuple[int, set[str]]:
    """Run ``aitune-profile ARGS`` in a fresh interpreter: its exit code and every module it imported."""
    out = tmp_path / "modules.json"
    subprocess.run(
        [sys.executable, "-c", _RUN.format(out=str(out)), json.dumps(args)],
        env=os.environ,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        check=True,
        timeout=300,
    )
    result = json.loads(out.read_text())
    return result["code"], set(result["modules"])


def loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return [name for name in names if name in modules or any(module.startswith(f"{name}.") for module in modules)]


@pytest.mark.parametrize(
    ("args", "never"),
    [
        (("report", str(BEFORE)), READER_NEVER),
        (("report", str(BEFORE), "--format", "md"), READER_NEVER),
        (("validate", str(BEFORE)), READER_NEVER),
        (("validate", "--json", str(BEFORE)), READER_NEVER),
        (("suggest", str(BEFORE)), READER_NEVER),
        (("suggest", "--json", str(BEFORE)), READER_NEVER),
        (("compare", str(BEFORE), str(AFTER)), COMPARE_NEVER),
        (("report", str(BEFORE), "--format", "html"), NEVER),
        (("compare", str(BEFORE), str(AFTER), "--html", "{tmp}/compare.html"), NEVER),
    ],
    ids=[
        "report",
        "report-md",
        "validate",
        "validate-json",
        "suggest",
        "suggest-json",
        "compare",
        "report-html",
        "compare-html",
    ],
)
def test_a_torch_free_command_imports_only_what_reading_its_documents_needs(tmp_path, args, never):
    code, modules = modules_of(tmp_path, *(arg.format(tmp=tmp_path) for arg in args))
    assert code in (0, None)
    assert loaded(modules, never) == []
    assert "aitune.report.model" in modules  # the document was checked, by decoding it into the typed model


def test_help_imports_nothing_that_reads_a_document(tmp_path):
    code, modules = modules_of(tmp_path, "--help")
    assert code in (0, None)
    assert loaded(modules, HELP_NEVER) == []
    assert "aitune.cli.render" not in modules and "aitune.cli.outputs" not in modules


def test_history_help_loads_no_database_layer(tmp_path):
    code, modules = modules_of(tmp_path, "history", "--help")
    assert code in (0, None)
    assert loaded(modules, HELP_NEVER) == []


def test_a_command_line_mistake_imports_no_document_reader(tmp_path):
    code, modules = modules_of(tmp_path, "report", "--format")  # the option's value is missing

    assert code == 2
    assert loaded(modules, HELP_NEVER) == []


def test_an_invalid_profile_still_gets_every_problem_listed(tmp_path):
    doc = json.loads(BEFORE.read_text())
    doc["runs"][0]["residual"]["cpu_time_fraction"] = -0.2
    doc["created_at"] = 7
    problems = validate(doc)
    assert [problem.split(":")[0] for problem in problems] == ["created_at", "runs[0].residual.cpu_time_fraction"]


def _mutations(doc: dict) -> list[dict]:
    """``doc`` with one value replaced or one key removed, at every path of its top level and first run:
    each path gets one of the replacements in turn (a value of each JSON type, or removal), which covers
    every kind of change at every depth for an eighth of the all-pairs cost."""
    paths: list[tuple] = []

    def walk(value: object, path: tuple) -> None:
        paths.append(path)
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, (*path, key))
        elif isinstance(value, list) and value:
            walk(value[0], (*path, 0))

    for key in doc:
        walk(doc[key], (key,))
    replacements = (True, None, "x", -1, 1.5, [], {}, KeyError)
    variants = []
    for index, path in enumerate(paths):
        changed = copy.deepcopy(doc)
        parent = changed
        for part in path[:-1]:
            parent = parent[part]
        replacement = replacements[index % len(replacements)]
        if replacement is not KeyError:
            parent[path[-1]] = replacement
        elif isinstance(parent, dict):
            del parent[path[-1]]
        variants.append(changed)
    return variants


def _decodes(variant: dict) -> bool:
    try:
        msgspec.json.decode(orjson.dumps(variant), type=Profile)
    except msgspec.ValidationError:
        return False
    return True


def test_the_decode_gives_the_verdict_of_the_field_by_field_walk_on_every_mutation():
    """The walk that lists every problem of a refused document finds one exactly when the decode refuses it."""
    doc = json.loads(BEFORE.read_text())
    doc["runs"] = doc["runs"][:1]
    disagree = [variant for variant in _mutations(doc) if _decodes(variant) != (not problems_in(variant, Profile, ()))]
    assert disagree == []
