"""A hostile corpus (tests/hostile/, made by its make_corpus.py) through every torch-free command and the viewer.

Each case exits 0, 1 or 2 as documented, with one `[error]` sentence and no traceback; no escape
sequence or markup from the document reaches the output; nothing partial is left on disk. In the
viewer, the page builds and every tab renders; a broken profile or URL is one sentence above the
tabs, a broken trace one sentence in the Timeline tab alone.
"""

from __future__ import annotations

import gzip
import html
import re
import sys
import unicodedata
from collections.abc import Iterator

import msgspec
import orjson
import panel as pn
import pytest
from cli_helpers import ROOT, invoke_cli, run_cli
from documents import generate_doc, worked_doc
from hostile.make_corpus import OPERATOR_KEY
from panel.models.tabulator import DataTabulator

from aitune.cli.pages import profile_page
from aitune.errors import ProfileError
from aitune.report import dumps, load, operator_views
from aitune.report.io import parse_json
from aitune.report.safe_text import visible
from aitune.viewer import views
from aitune.viewer.app import build_page
from aitune.viewer.selection import Selection
from aitune.viewer.sources import Loaded
from aitune.viewer.store import ProfileStore

CORPUS = ROOT / "tests" / "hostile"
NAMED = sorted(CORPUS.glob("name-*.profile.json"))
BROKEN_PROFILES = ["deep-1000.profile.json", "schema-version-float.profile.json"]
BROKEN_TRACES = sorted(path.name for path in CORPUS.glob("*.trace.json"))
INVARIANTS = {
    "runs-none": "runs: no measured run; capture the profile again",
    "phases-dropped": "runs[0]: no phases, but the document has a phase_split",
    "phases-reordered": "runs[0].phases: ['decode', 'prefill'] are not phase_split's phases ['prefill', 'decode']",
    "phase-no-run-has": "phase_split.phases: ['encoder'] is in no run's phases",
    "phases-each-whole": "runs[0].phases[0].cpu_time_fraction: 1.0000, but the phase is 0.7105 of the run",
    "tokens-none-first-token-past-the-run": "runs[0].generation.output_tokens: 0, but the phases made 4",
    "first-token-1e300": "runs[0].generation.ttft_us: 1e+300 is larger than any figure a profile holds",
    "tokens-per-second-1e18": "runs[0].generation.tokens_per_second: 1e+18, but 4 token(s) in 1140.000 µs make 3509",
    "flops-300-digits": "runs[0].regions[0].work.flops: 1e+300 is larger than any figure a profile holds",
    "flops-overflow": "runs[0].regions[0].work.flops: 1.7e+308 is larger than any figure a profile holds",
    "counted-time-subnormal": "runs[0].regions[0].work.counted_cpu_time_us: 4.94e-324 µs is below the trace clock's",
    "region-time-overflow": "runs[0].regions[0].cpu_time_us: 1.7e+308 is larger than any figure a profile holds",
}
"""Each schema-valid document of the corpus whose figures no capture makes → the first problem validate names."""


def cli(*args: str, real: bool):
    """``aitune-profile args``: a real process without torch, as a maintainer's shell runs it, for the first
    case of each command (``real``); in this process (`invoke_cli`) for the others, where the text and
    the exit code are what is under test, not the process."""
    return run_cli(*args, block_torch=True) if real else invoke_cli(*args)


def _assert_clean(result, allowed=(0,)):
    assert result.returncode in allowed, result.stderr
    assert "Traceback" not in result.stderr
    for control in ("\x1b", "\x07", "\x00"):
        assert control not in result.stdout + result.stderr
    if result.returncode == 2:
        assert result.stderr.startswith("[error] ") and result.stderr.count("\n") == 1


@pytest.mark.parametrize("profile", NAMED, ids=lambda path: path.stem)
@pytest.mark.parametrize(
    "command",
    [["report"], ["report", "--format", "md"], ["report", "--format", "json"], ["suggest"], ["validate"]],
    ids=" ".join,
)
def test_a_hostile_name_is_shown_as_data_by_every_command(profile, command):
    result = cli(*command, str(profile), real=profile == NAMED[0])

    _assert_clean(result)
    if command == ["report"]:
        assert "experts[gate]" in result.stdout or "experts" not in profile.name
        assert "a[/b]" in result.stdout or "markup-close" not in profile.name
        assert "[link=https://evil.example]click[/link]" in result.stdout or "link" not in profile.name
        assert "\\x1b[2J" in result.stdout or "escapes" not in profile.name


@pytest.mark.parametrize("profile", NAMED, ids=lambda path: path.stem)
def test_a_hostile_name_cannot_inject_html_or_lines_into_markdown(profile):
    result = invoke_cli("report", str(profile), "--format", "md")

    assert "<script>" not in result.stdout
    assert not any(line.startswith("## injected") for line in result.stdout.splitlines())
    table_rows = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert all(line.endswith(" |") for line in table_rows)


@pytest.mark.parametrize("profile", NAMED, ids=lambda path: path.stem)
def test_compare_and_bundle_take_hostile_names(profile, tmp_path):
    compared = cli("compare", str(profile), str(profile), real=profile == NAMED[0])
    bundled = cli("bundle", str(profile), "-o", str(tmp_path / "b.zip"), real=profile == NAMED[0])

    _assert_clean(compared)
    _assert_clean(bundled)
    assert (tmp_path / "b.zip").is_file()


@pytest.mark.parametrize("name", BROKEN_PROFILES)
@pytest.mark.parametrize("command", [["report"], ["compare"], ["suggest"], ["bundle"]], ids=" ".join)
def test_a_broken_profile_is_one_sentence(name, command, tmp_path):
    extra = {"compare": [str(CORPUS / name)], "bundle": ["-o", str(tmp_path / "b.zip")]}.get(command[0], [])

    result = cli(*command, str(CORPUS / name), *extra, real=name == BROKEN_PROFILES[0])

    _assert_clean(result, allowed=(2,))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", BROKEN_PROFILES)
def test_validate_names_the_problem_of_a_broken_profile(name):
    result = cli("validate", str(CORPUS / name), real=name == BROKEN_PROFILES[0])

    _assert_clean(result, allowed=(1, 2))


@pytest.mark.parametrize("name", BROKEN_TRACES)
def test_a_malformed_trace_is_one_sentence_and_leaves_nothing(name, tmp_path):
    real = name == BROKEN_TRACES[0]
    analyzed = cli("analyze", str(CORPUS / name), "--out", str(tmp_path / "out"), real=real)
    bundled = cli("bundle", str(NAMED[0]), "--trace", str(CORPUS / name), "-o", str(tmp_path / "b.zip"), real=real)

    _assert_clean(analyzed, allowed=(2,))
    assert str(CORPUS / name) in analyzed.stderr
    assert not (tmp_path / "out").exists()
    _assert_clean(bundled, allowed=(0, 2))
    assert (tmp_path / "b.zip").exists() == (bundled.returncode == 0)


def test_the_corpus_holds_every_invariant_case():
    assert sorted(path.name for path in CORPUS.glob("invariant-*")) == sorted(
        f"invariant-{case}.profile.json" for case in INVARIANTS
    )


@pytest.mark.parametrize("case", INVARIANTS)
def test_validate_names_the_json_path_of_a_figure_no_capture_makes(case):
    path = CORPUS / f"invariant-{case}.profile.json"

    result = cli("validate", str(path), real=case == next(iter(INVARIANTS)))

    _assert_clean(result, allowed=(1,))
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{path}: {INVARIANTS[case]}")
    assert all(line.startswith(f"{path}: ") for line in lines[:-1]) and lines[-1].endswith("problem(s).")


@pytest.mark.parametrize("case", INVARIANTS)
@pytest.mark.parametrize(
    "command",
    [
        ["report"],
        ["report", "--format", "md"],
        ["report", "--format", "html", "-o", "out.html"],
        ["suggest"],
        ["suggest", "--json"],
        ["compare", "OTHER"],
        ["bundle", "-o", "out.zip"],
    ],
    ids=" ".join,
)
def test_every_reader_refuses_a_figure_no_capture_makes_in_one_sentence_naming_its_path(case, command, tmp_path):
    path = CORPUS / f"invariant-{case}.profile.json"
    args = [str(path) if arg == "OTHER" else str(tmp_path / arg) if arg.startswith("out.") else arg for arg in command]

    result = cli(args[0], str(path), *args[1:], real=False)

    _assert_clean(result, allowed=(2,))
    assert result.stderr.startswith(f"[error] {path}: {INVARIANTS[case]}")
    assert result.stdout == "" and list(tmp_path.iterdir()) == []


ABSURD_FIGURE = re.compile(r"\b(?:inf|nan)\b|∞|\d{20,}|\d{1,3}(?:,\d{3}){6,}", re.IGNORECASE)
"""inf, nan, or a number of 20 digits or more (grouped or not): what no reader may print."""


@pytest.mark.parametrize("make", [generate_doc, worked_doc], ids=lambda make: make.__name__)
def test_the_documents_the_invariant_cases_edit_go_through_every_reader_as_real_numbers(make, tmp_path):
    path = tmp_path / "valid.profile.json"
    path.write_bytes(dumps(make()))
    shown = []
    for command in (
        ["report"],
        ["report", "--format", "md"],
        ["suggest"],
        ["suggest", "--json"],
        ["compare", str(path)],
    ):
        result = invoke_cli(command[0], str(path), *command[1:])
        _assert_clean(result)
        shown.append(result.stdout)
    html_report = invoke_cli("report", str(path), "--format", "html", "-o", str(tmp_path / "r.html"))
    _assert_clean(html_report)
    shown.append(re.sub(r"<(script|style)\b.*?</\1>", "", (tmp_path / "r.html").read_text(), flags=re.DOTALL))

    assert not ABSURD_FIGURE.findall("\n".join(shown))


@pytest.mark.parametrize("case", INVARIANTS)
def test_a_figure_no_capture_makes_is_one_sentence_above_the_viewers_tabs(case, tmp_path):
    runs = _runs_folder(tmp_path, (CORPUS / f"invariant-{case}.profile.json").read_bytes())

    texts = _page_texts(build_page(runs, {"before": [b"p.profile.json"]}))

    assert texts["problem"].startswith(f"p.profile.json: {INVARIANTS[case]}") and "\n" not in texts["problem"]


def test_a_gzip_that_unpacks_past_the_limit_is_refused_before_it_is_all_in_memory():
    bomb = gzip.compress(b" " * (2**20 + 1))

    with pytest.raises(ProfileError, match=r"^bomb.gz unpacks to at least 1 MB, over the 1 MB limit; "):
        parse_json(bomb, "bomb.gz", max_bytes=2**20)


def test_the_committed_corpus_is_what_the_script_makes():
    from hostile.make_corpus import corpus

    assert {name: (CORPUS / name).read_bytes() for name in corpus()} == corpus()


# --- the viewer leg: the page built in-process, as `panel serve viewer/` builds it per session ---

TAB_NAMES = [
    "Regions",
    "Suggestions",
    "Region tree",
    "Run timing",
    "Phases",
    "Ranks",
    "Operators",
    "Memory",
    "Efficiency",
    "Warnings",
    "Timeline",
    "History",
]
HOSTILE_QUERY_VALUES = {
    "nul": b"\x00",
    "over-long": b"a" * 5000,
    "over-long-file-name": b"sub/" + b"x" * 300 + b".json",
    "not-utf-8": b"\xff\xfe.json",
    "parent": b"../outside.profile.json",
    "absolute": b"/etc/passwd",
    "folder": b"sub",
}


def _shown_text(viewable) -> str:
    # Panel's HTML panes hand Bokeh their markup entity-escaped once more: undo that, drop the tags,
    # then undo the escaping of the text itself to read the words.
    root = viewable.get_root()
    texts = (model.text for model in root.references() if isinstance(getattr(model, "text", None), str))
    return " ".join(html.unescape(re.sub(r"<[^>]*>", "", html.unescape(text))).strip() for text in texts).strip()


def _page_texts(page) -> dict[str, str]:
    """The text each part of the built page shows: every tab rendered in turn, then the problem line above them."""
    tabs = page.select(pn.Tabs)[0]
    texts = {name: _shown_text(view) for name, view in zip(TAB_NAMES, tabs, strict=True)}
    return {**texts, "problem": _shown_text(page.objects[1].objects[0])}


def _runs_folder(tmp_path, profile: bytes, trace: bytes | None = None):
    (tmp_path / "sub").mkdir()
    (tmp_path / "p.profile.json").write_bytes(profile)
    if trace is not None:
        (tmp_path / "p.trace.json").write_bytes(trace)
    return tmp_path


def _with_trace_file(profile) -> bytes:
    return dumps({**orjson.loads(profile.read_bytes()), "trace_file": "p.trace.json"})


@pytest.mark.parametrize("value", HOSTILE_QUERY_VALUES.values(), ids=HOSTILE_QUERY_VALUES)
def test_a_hostile_url_value_builds_the_page_with_one_short_sentence(value, tmp_path):
    runs = _runs_folder(tmp_path, (CORPUS / NAMED[0]).read_bytes())

    texts = _page_texts(build_page(runs, {"before": [value], "after": [value]}))

    problem = texts["problem"]
    assert problem.endswith((" pick a profile from the list.", " pick one from the list.", " in the runs folder."))
    assert problem.count(";") == 1 and len(problem) < 160
    assert "\x00" not in problem and "Traceback" not in " ".join(texts.values())


@pytest.mark.parametrize("profile", NAMED, ids=lambda path: path.stem)
def test_a_hostile_name_renders_in_every_tab_of_the_viewer(profile, tmp_path):
    runs = _runs_folder(tmp_path, profile.read_bytes())

    texts = _page_texts(build_page(runs, {"before": [b"p.profile.json"], "after": [b"p.profile.json"]}))

    assert texts["problem"] == ""
    assert "What to tune next, in the after profile p.profile.json" in texts["Suggestions"]


def test_an_operator_rows_extra_key_never_reaches_the_viewer():
    doc = load(CORPUS / "operator-key-html.profile.json")
    store = ProfileStore(before=Loaded("p.json", doc))

    root = views.Operators(store=store, selection=Selection())._render().get_root()

    assert all(OPERATOR_KEY not in msgspec.to_builtins(row) for rows in operator_views(doc).values() for row in rows)
    (grid,) = [model for model in root.references() if isinstance(model, DataTabulator)]
    assert OPERATOR_KEY not in {column.field for column in grid.columns}
    assert not any("<" in column.title for column in grid.columns)


@pytest.mark.parametrize("name", BROKEN_PROFILES)
def test_a_broken_profile_is_one_sentence_above_the_viewers_tabs(name, tmp_path):
    runs = _runs_folder(tmp_path, (CORPUS / name).read_bytes())

    texts = _page_texts(build_page(runs, {"before": [b"p.profile.json"]}))

    assert texts["problem"].startswith("p.profile.json: ") and texts["problem"].count("\n") == 0


@pytest.mark.parametrize("name", BROKEN_TRACES)
def test_a_broken_trace_is_one_sentence_in_the_timeline_tab_alone(name, tmp_path):
    runs = _runs_folder(tmp_path, _with_trace_file(NAMED[0]), (CORPUS / name).read_bytes())

    texts = _page_texts(build_page(runs, {"before": [b"p.profile.json"]}))

    assert texts["problem"] == ""
    assert texts["Timeline"].startswith("p.trace.json: ") and texts["Timeline"].endswith(".")
    assert "Download" not in texts["Timeline"]
    assert all("p.trace.json" not in texts[name] for name in TAB_NAMES if name != "Timeline")
    assert "Hatched bars" in texts["Regions"] and "What to tune p.profile.json" in texts["Suggestions"]


# --- invisible characters: a zero-width name is spelled out at every edge ---

ZERO_WIDTH = CORPUS / "name-zero-width.profile.json"
SPELLED = "lm\\u200b_he\\u200dad\\ufeff"
"""How every edge shows the corpus's ``lm\u200b_he\u200dad\ufeff``, which reads as ``lm_head`` if not spelled out."""
INVISIBLE = [chr(code) for code in range(sys.maxunicode + 1) if unicodedata.category(chr(code)) == "Cf"]


def test_every_invisible_format_character_is_spelled_out():
    assert [char for char in INVISIBLE if visible(char) == char] == []
    assert visible("un\u200bet") == "un\\u200bet" and visible("\U000e0041") == "\\U000e0041"


def _strings(value) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)
    elif hasattr(value, "tolist"):
        yield from _strings(value.tolist())


def page_strings(page) -> str:
    """Every string the built page hands the browser: each model's properties (texts, titles, options, factors,
    table data) in every tab, one per line."""
    tabs = page.select(pn.Tabs)[0]
    models = [model for part in (page, *tabs) for model in part.get_root().references()]
    found = (text for model in models for value in model.properties_with_values().values() for text in _strings(value))
    return "\n".join(found)


def _viewer(tmp_path) -> tuple[str, str]:
    runs = _runs_folder(tmp_path, ZERO_WIDTH.read_bytes())
    return page_strings(build_page(runs, {"before": [b"p.profile.json"]})), SPELLED


EDGES = {
    "terminal": lambda tmp_path: (invoke_cli("report", str(ZERO_WIDTH)).stdout, SPELLED),
    "markdown": lambda tmp_path: (
        invoke_cli("report", str(ZERO_WIDTH), "--format", "md").stdout,
        SPELLED.replace("\\", "\\\\"),
    ),
    "html": lambda tmp_path: (profile_page(load(ZERO_WIDTH)), SPELLED),
    "viewer": _viewer,
}


@pytest.mark.parametrize("edge", EDGES.values(), ids=EDGES)
def test_a_zero_width_name_is_spelled_out_at_every_edge(edge, tmp_path):
    shown, spelled = edge(tmp_path)

    assert spelled in shown
    assert [char for char in INVISIBLE if char in shown] == []
