"""The single-file HTML report: what the page holds, what it may never hold, and its bounds (no browser needed;
tests/test_html_browser.py opens the same pages in Chromium)."""

from __future__ import annotations

import base64
import hashlib
import html
import os
import re
import stat
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import orjson
import pytest
from builders import GENERATE, HEAD, allocation, op, region, run, shaped, trace
from cli_helpers import ROOT, invoke_cli
from documents import HOSTILE, pipeline_doc, with_warning

from aitune import compare
from aitune.cli.pages import pair_page, profile_page
from aitune.compare.gains import speedup_line
from aitune.compare.loop_report import read_tune_folder
from aitune.markers import region_path
from aitune.report import build_profile, load
from aitune.report.html import MAX_TABLE_ROWS, MAX_TREE_NODES, STYLE, table
from aitune.report.safe_text import html_text, shown_name
from aitune.report.section_rows import (
    PHASE_SHARE_TITLE,
    efficiency_table,
    memory_table,
    phase_share_table,
    phase_table,
    roof_lines,
)
from aitune.report.svg import MAX_BARS, Bar, bar_chart

SAMPLES = ROOT / "sample_traces"
TUNED = SAMPLES / "tuned-pipeline"
NAMED = sorted((ROOT / "tests" / "hostile").glob("name-*.profile.json"))

WRITTEN_TAGS = {
    *("html", "head", "meta", "title", "style", "body", "header", "nav", "a", "section", "footer"),
    *("h1", "h2", "h3", "p", "br", "b", "ul", "ol", "li", "dl", "dt", "dd", "details", "summary", "span", "div"),
    *("table", "thead", "tbody", "tr", "th", "td"),
    *("svg", "g", "text", "tspan", "rect", "line", "circle"),
}
"""Every element the renderers write: a name that became markup would add one outside this set."""


class _Elements(HTMLParser):
    """The page's elements and attributes, and its text, as a browser's parser reads them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.attributes: set[str] = set()
        self.text: list[str] = []
        self.csp: str | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attributes |= {name for name, _ in attrs}
        if tag == "meta" and ("http-equiv", "Content-Security-Policy") in attrs:
            self.csp = dict(attrs)["content"]

    def handle_data(self, data):
        self.text.append(data)


def parsed(page: str) -> _Elements:
    elements = _Elements()
    elements.feed(page)
    return elements


class _Rows(HTMLParser):
    """The text of every table row (header rows too) of one section, cell by cell, as a browser reads it."""

    def __init__(self, kind: str) -> None:
        super().__init__(convert_charrefs=True)
        self.kind, self.inside, self.rows, self.lines = kind, False, [], []

    def handle_starttag(self, tag, attrs):
        if tag == "section":
            self.inside = ("class", self.kind) in attrs
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag in ("td", "th"):
            self.rows[-1].append("")

    def handle_data(self, data):
        if self.inside and self.rows and self.lasttag in ("td", "th"):
            self.rows[-1][-1] += data
        elif self.inside and self.lasttag in ("p", "br"):
            self.lines.append(data)


def section(page: str, kind: str) -> _Rows:
    rows = _Rows(kind)
    rows.feed(page)
    return rows


GENERATE_MODEL = f"untuned_module:{HOSTILE}\u200b"


def generate_with_work_and_memory() -> dict:
    """Two runs of a generate: four calls of a region named with a script and a zero-width space (the first call,
    the prefill, longer), each holding a 64×32×16 ``aten::mm`` of recorded shapes and 1 MiB allocated and freed,
    then ``lm_head``, whose one operator has no FLOP formula; on a machine of known roofs."""
    events = []
    for index in range(2):
        start = index * 1000.0
        events += [run(index, start, start + 200), region(GENERATE, start + 1, start + 199)]
        for step in range(4):
            at = start + 10 + 40 * step
            events += [
                region(GENERATE_MODEL, at, at + 20 + (10 if step == 0 else 0)),
                shaped("aten::mm", at + 2, at + 12, [[64, 32], [32, 16]], ["float", "float"]),
                allocation(at + 3, 2**20, 2**20),
                allocation(at + 13, -(2**20), 0),
                region(HEAD, at + 31, at + 35),
                op("aten::<i>softmax</i>", at + 32, at + 34),
            ]
    roofs = {"cpu": {"gemm_flops_per_s": {"float32": 1e11}, "copy_bytes_per_s": 1e10, "source": "<b>synthetic</b>"}}
    return trace(*events, environment={"machine_peaks": roofs})


def test_the_page_shows_the_phases_memory_and_work_the_document_holds_with_every_name_escaped():
    doc = build_profile(generate_with_work_and_memory())

    page = profile_page(doc)

    phases, memory, work = (section(page, kind) for kind in ("phases", "memory", "efficiency"))
    shown = shown_name(GENERATE_MODEL)  # cut, the zero-width space spelled out
    assert ["prefill", "0.050", "25.0%", "1"] in phases.rows and ["decode", "0.150", "75.0%", "3"] in phases.rows
    assert [shown, "60.0%", "40.0%"] in phases.rows  # of the 50 µs prefill 30 are the model's; 3 × 20 of decode's 150
    assert [shown_name(region_path(GENERATE_MODEL)), "cpu", "4 MiB", "4 MiB", "1 MiB", "1 MiB"] in memory.rows
    assert [row[1] for row in work.rows if row[0] == shown] == ["262.14 kFLOP"]  # 4 calls × 2·64·32·16 per run
    assert any("uncounted (aten::<i>softmax</i>)" in line for line in work.lines)
    assert roof_lines(doc)[0] in work.lines  # the roofs' source, a document string, as text
    names, shares = phase_share_table(doc, str)
    expected = {
        "phases": [*phase_table(doc), [PHASE_SHARE_TITLE, *names], *shares],
        "memory": memory_table(doc, str)[0],
        "efficiency": efficiency_table(doc),
    }
    for kind, rows in expected.items():  # every row the Markdown shows, cell for cell
        assert all([shown_name(cell) for cell in row] in section(page, kind).rows for row in rows)
    elements = parsed(page)
    assert elements.tags <= WRITTEN_TAGS and not any(name.startswith("on") for name in elements.attributes)
    assert "\u200b" not in page and "\\u200b" in "".join(elements.text)


def hostile_pair():
    hostile = with_warning(pipeline_doc(65.0, extra_region=f"untuned_module:{HOSTILE}"), "HOSTILE", HOSTILE)
    return hostile, pipeline_doc(30.0)


@pytest.mark.parametrize("profile", NAMED, ids=lambda path: path.stem)
def test_a_hostile_name_reaches_the_page_as_text_and_adds_no_element(profile):
    doc = load(profile)

    page = profile_page(doc)

    elements = parsed(page)
    assert elements.tags <= WRITTEN_TAGS
    assert not any(name.startswith("on") for name in elements.attributes)
    warning = doc.warnings[0].source
    assert html_text(warning) in page  # shown, spelled out and escaped
    assert "<script" not in page


def test_a_script_in_a_region_name_and_a_warning_is_shown_in_a_pair_page_and_never_becomes_markup():
    before, after = hostile_pair()
    diff = compare.compare_profiles(before, after)

    page = pair_page(before, after, diff)

    elements = parsed(page)
    assert elements.tags <= WRITTEN_TAGS
    assert "img" not in elements.tags and "onerror" not in elements.attributes
    assert HOSTILE in "".join(elements.text)  # the reader sees the name itself, as text


def test_the_page_forbids_every_load_and_script_and_allows_only_its_own_stylesheet():
    page = profile_page(load(TUNED / "before" / "profile.json"))

    policy = parsed(page).csp
    digest = base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()
    assert policy is not None
    assert "default-src 'none'" in policy and f"style-src 'sha256-{digest}'" in policy
    assert "script-src" not in policy  # falls back to default-src 'none'
    assert "://" not in page.split("<body>")[0]  # the head names no address to load


def test_a_profile_page_has_every_section_of_the_report():
    doc = load(TUNED / "before" / "profile.json")

    page = profile_page(doc)

    sections = [line.split('"')[0] for line in page.split('<section id="')[1:]]
    kinds = [part.split('class="')[1].split('"')[0] for part in page.split("<section ")[1:]]
    assert kinds == [
        *("overview", "headline", "runs", "memory", "tree", "efficiency", "operators", "warnings", "suggestions"),
        "environment",
    ]  # memory and efficiency say why this profile has none, as the Markdown does
    assert len(sections) == len(kinds)
    assert page.count("<svg") >= 3  # the headline's shares, each run's time, the targets' predictions
    assert "untuned_module:unet.blocks.0" in page  # a nested region, in the tree
    assert doc.warnings[0].code in page


def test_a_pair_page_shows_the_speedup_with_its_interval_and_every_regions_change():
    before, after = load(TUNED / "before" / "profile.json"), load(TUNED / "after" / "profile.json")
    diff = compare.compare_profiles(before, after)

    page = pair_page(before, after, diff)

    line = speedup_line(diff.run_time)
    assert re.search(r"\[\d+\.\d\d, \d+\.\d\d\]", line)  # the sample pair has an interval
    assert html.escape(line) in page
    for row in diff.regions:
        assert html.escape(row.path) in page


def test_a_tune_folder_page_adds_each_tuned_regions_gains(tmp_path):
    folder = read_tune_folder(TUNED)
    diff = compare.compare_profiles(folder.before, folder.after, domain=folder.report.domain)

    page = pair_page(folder.before, folder.after, diff, folder.report)

    assert 'class="tuned"' in page
    for gain in folder.report.regions:
        assert f"<td>{gain.winner}</td>" in page
    assert f"End to end: {folder.report.end_to_end.shown()}" in page


def test_a_long_table_lists_its_bound_and_says_how_many_rows_it_left_out():
    rows = [(f"region {index}", str(index)) for index in range(MAX_TABLE_ROWS + 7)]

    markup = table(["Region", "Value"], rows)

    assert markup.count("<tr>") == MAX_TABLE_ROWS + 1  # the header's row too
    assert "… 7 more row(s) not shown" in markup


def test_a_chart_draws_its_bound_and_counts_the_rest():
    bars = [Bar(f"region {index}", float(index), f"{index} ms") for index in range(MAX_BARS + 3)]

    svg = bar_chart("shares", bars)

    assert svg.count('class="bar"') == MAX_BARS
    assert "… 3 more not drawn" in svg


def test_a_profile_of_many_long_named_regions_stays_within_the_bound():
    names = [f"untuned_module:{'x' * 300}_{index}" for index in range(MAX_TREE_NODES + 100)]
    events = [region(name, index * 2.0 + 1.0, index * 2.0 + 2.0) for index, name in enumerate(names)]
    end = len(names) * 2.0 + 1.0
    parent = region("untuned_module:parent", 0.5, end)
    doc = build_profile(trace(parent, *events, run(0, 0.0, end + 1.0), config={"measured_runs": 1}))

    page = profile_page(doc)

    assert "… 101 more region(s) not shown" in page  # the parent and 499 of its children shown
    assert "x" * 81 not in page  # every name cut at 80 characters
    assert len(page.encode()) < 500_000  # 178 kB when written; docs/commands.md states it


def test_report_writes_the_html_file_and_compare_takes_a_tune_folder(tmp_path):
    written = invoke_cli(
        "report", str(TUNED / "before" / "profile.json"), "--format", "html", "-o", str(tmp_path / "r.html")
    )
    compared = invoke_cli("compare", str(TUNED), "--html", str(tmp_path / "t.html"), "--json")

    assert written.returncode == 0, written.stderr
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert compared.returncode == 0, compared.stderr
    assert orjson.loads(compared.stdout)["domain"] == read_tune_folder(TUNED).report.domain
    assert 'class="tuned"' in (tmp_path / "t.html").read_text()


def test_compare_without_after_names_what_it_needs():
    result = invoke_cli("compare", str(TUNED / "before" / "profile.json"))

    assert result.returncode == 2
    assert "compare needs AFTER, or a folder `aitune-profile tune` wrote as BEFORE" in result.stderr


def test_bundle_html_adds_the_report_of_the_redacted_profile(tmp_path):
    result = invoke_cli("bundle", str(TUNED / "before" / "profile.json"), "-o", str(tmp_path / "b.zip"), "--html")

    assert result.returncode == 0, result.stderr
    with zipfile.ZipFile(tmp_path / "b.zip") as archive:
        page = archive.read("report.html").decode()
        assert "report.html" in archive.read("README.txt").decode()
    assert page.startswith("<!DOCTYPE html>") and str(Path.home()) not in page


def test_the_same_profile_gives_the_same_page():
    doc = load(SAMPLES / "scenarios-batch.profile.json")

    assert profile_page(doc) == profile_page(doc)


def test_an_output_that_is_no_regular_file_is_refused_and_left_as_it_was(tmp_path):
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)

    result = invoke_cli("report", str(TUNED / "before" / "profile.json"), "--format", "html", "-o", str(pipe))

    assert result.returncode == 2
    assert f"{pipe} is not a regular file (a device or a pipe)" in result.stderr
    assert stat.S_ISFIFO(pipe.stat().st_mode)


@pytest.mark.parametrize(
    "profile",
    ["tuned-pipeline/before/profile.json", "tuned-pipeline/after/profile.json", "scenarios-batch.profile.json"],
)
def test_the_committed_samples_pages_stay_small(profile):
    page = profile_page(load(SAMPLES / profile))

    assert len(page.encode()) < 100_000  # 12.7 to 30.2 kB when written; docs/commands.md states them
