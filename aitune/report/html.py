"""The single-file HTML report: a page that opens offline in any browser, and the sections a document alone gives.

The page is self-contained: one inline stylesheet, charts as inline SVG (`aitune.report.svg`), the
region tree as nested ``<details>``, and no script at all. Its Content-Security-Policy forbids every
network load, every script and every style but its own stylesheet (by hash), so a name that slipped
past escaping still could not run or fetch anything. Every string from a document passes through
`aitune.report.safe_text` (`Html` marks the markup this module wrote on purpose; everything else is
escaped where it is placed).

Size bound: a table lists at most `MAX_TABLE_ROWS` rows, the tree `MAX_TREE_NODES` regions, a chart
`aitune.report.svg.MAX_BARS` bars, a page `MAX_SCENARIOS` scenarios; a name is cut to
`aitune.report.safe_text.MAX_NAME_CHARS` characters and a message to `MAX_MESSAGE_CHARS`; each cut
says what it left out. The stages below report add their own sections with these helpers
(`aitune.suggest.html`, `aitune.compare.html`); `render_page` lays any list of `Section` out.
"""

from __future__ import annotations

import base64
import hashlib
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from aitune.report.document import LITE_LACKS, is_lite, operator_runs_note, scenario_names, select_scenario
from aitune.report.efficiency import has_work
from aitune.report.formatting import MISSING, factor, ms, percent
from aitune.report.headline import headline_rows
from aitune.report.key_averages import OPERATOR_HEADER, operator_tables
from aitune.report.markdown import time_domains
from aitune.report.memory import memory_note
from aitune.report.model import (
    UNSET,
    CaptureOverhead,
    ProfileLike,
    Summary,
    Target,
    Timing,
    TreeNode,
    as_profile,
    given,
    json_form,
    time_in,
)
from aitune.report.phases import split_line, tokens_line
from aitune.report.safe_text import MAX_NAME_CHARS, html_name, html_text, shown_name
from aitune.report.samples import median_run
from aitune.report.section_rows import (
    EFFICIENCY_HEADER,
    MEMORY_HEADER,
    NO_WORK,
    PHASE_HEADER,
    PHASE_RESIDUAL_NOTE,
    PHASE_SHARE_TITLE,
    efficiency_table,
    memory_lead,
    memory_table,
    phase_share_table,
    phase_table,
    roof_lines,
    uncounted_notes,
)
from aitune.report.svg import Bar, bar_chart

MAX_TABLE_ROWS = 200
"""Most rows one table lists; a cut table says how many it left out (the JSON has them all)."""

MAX_TREE_NODES = 500
"""Most regions the tree shows; the rest are counted below it."""

MAX_MESSAGE_CHARS = 1000
"""Longest warning or reason text shown whole; a longer one is cut like a name (`shown_name`)."""

MAX_SCENARIOS = 8
"""Most scenarios of a multi-scenario document the page lays out, each with every section."""

TREE_OPEN_DEPTH = 2
"""Tree levels shown open when the page loads; deeper ones open with a click."""


class Html(str):
    """Markup written by these renderers on purpose; any other string is escaped where it is placed."""


@dataclass(frozen=True)
class Section:
    """One part of the page: its heading (text, escaped), its body (markup), a fixed CSS name for tests and styles."""

    title: str
    body: Html
    kind: str


def text(value: object) -> Html:
    """Document text as HTML: control characters spelled out, then escaped (`html_text`)."""
    return Html(html_text(value))


def name(value: object, limit: int = MAX_NAME_CHARS) -> Html:
    """A name (or a message, with a larger ``limit``) cut by `shown_name`, then escaped (`html_name`)."""
    return Html(html_name(value, limit))


def paragraph(*lines: str, css: str = "") -> Html:
    """Lines of text (escaped unless `Html`) as one paragraph, each on its own line."""
    joined = "<br>".join(line if isinstance(line, Html) else text(line) for line in lines)
    return Html(f'<p class="{css}">{joined}</p>' if css else f"<p>{joined}</p>")


def table(
    header: Sequence[str], rows: Iterable[Sequence[Any]], *, css: str = "figures", limit: int = MAX_TABLE_ROWS
) -> Html:
    """A table of at most ``limit`` rows; every cell but an `Html` one is a name (`name`), so none can break it.

    ``css="figures"`` right-aligns every column after the first.
    """
    listed = list(rows)
    head = "".join(f"<th>{text(cell)}</th>" for cell in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{cell if isinstance(cell, Html) else name(cell)}</td>" for cell in row) + "</tr>"
        for row in listed[:limit]
    )
    cut = _left_out(len(listed) - limit, "row")
    return Html(f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{cut}')


def _left_out(count: int, noun: str) -> str:
    return (
        f'<p class="cut">… {count} more {noun}(s) not shown; the profile JSON holds them all.</p>' if count > 0 else ""
    )


def profile_sections(doc: ProfileLike) -> list[Section]:
    """Every section a document alone gives, in reading order; a multi-scenario document repeats them per scenario."""
    sections = [overview(doc)]
    names = scenario_names(doc)
    for scenario in (names or [None])[:MAX_SCENARIOS]:
        view = select_scenario(doc, scenario)
        prefix = "" if scenario is None else f"Scenario {shown_name(scenario)} · "
        parts = [
            *headlines(view),
            phases(view),
            run_timing(view),
            memory(view),
            region_tree(view),
            efficiency(view),
            operators(view),
            warnings(view),
        ]
        sections += [Section(prefix + part.title, part.body, part.kind) for part in parts if part.body]
    if len(names) > MAX_SCENARIOS:
        sections.append(
            Section("Scenarios", paragraph(f"… {len(names) - MAX_SCENARIOS} more scenario(s) not shown."), "cut")
        )
    sections.append(environment(doc))
    return [section for section in sections if section.body]


def overview(doc: ProfileLike) -> Section:
    """What was profiled, when, how, and by which aitune."""
    record = as_profile(doc)
    facts = [
        ("Target", _target_name(record.target) or MISSING),
        ("Created", record.created_at or MISSING),
        ("aitune version", record.aitune_version or MISSING),
        ("Runs", f"{given(record.config.warmup_runs, MISSING)} warmup, {len(record.runs)} measured"),
        ("Regions observed", str(len(record.regions))),
        ("Profiler activities", ", ".join(given(record.profiler.activities, [])) or MISSING),
    ]
    if is_lite(record):
        facts.append(("Lite capture", LITE_LACKS))
    if note := operator_runs_note(record):
        facts.append(("Operator runs", note))
    if record.capture_overhead is not UNSET:
        facts.append(("Capture overhead", _overhead(record.capture_overhead)))
    if names := scenario_names(record):
        facts.append(("Scenarios", ", ".join(names)))
    return Section("Overview", facts_list(facts), "overview")


def _target_name(target: Target) -> str:
    """The captured script's name, else the profiled object's type; "" when the document names neither."""
    return given(target.script, "") or given(target.type, "")


def facts_list(facts: Iterable[tuple[str, str]]) -> Html:
    """Label: value pairs as a definition list; both escaped, values cut as messages."""
    items = "".join(f"<dt>{text(label)}</dt><dd>{name(value, MAX_MESSAGE_CHARS)}</dd>" for label, value in facts)
    return Html(f'<dl class="facts">{items}</dl>')


def _overhead(overhead: CaptureOverhead) -> str:
    ratio = factor(overhead.ratio, given(overhead.ratio_low, None), given(overhead.ratio_high, None))
    return (
        f"median run {ms(overhead.captured_wall_time_us)} ms under capture vs "
        f"{ms(overhead.plain_wall_time_us)} ms uninstrumented ({ratio})"
    )


def headlines(doc: ProfileLike) -> list[Section]:
    """Per time domain, the headline's rows (`aitune.report.headline`): a chart of their shares and a table."""
    return [headline(doc, domain) for domain in time_domains(doc)] if as_profile(doc).runs else []


def headline(doc: ProfileLike, domain: str) -> Section:
    """Where the time goes in ``domain``: each headline row's median time and share, largest first, residual last."""
    rows = headline_rows(doc, domain)
    ordered = sorted(rows[:-1], key=lambda row: -statistics.median(row.times_us)) + rows[-1:]
    bars = [
        Bar(row.label, row.share, f"{percent(row.share)} · {ms(statistics.median(row.times_us))} ms") for row in ordered
    ]
    body = table(
        ["Region", "Median (ms)", "Share", "Min–max (ms)"],
        [
            (
                row.label,
                ms(statistics.median(row.times_us)),
                percent(row.share),
                f"{ms(min(row.times_us))}–{ms(max(row.times_us))}",
            )
            for row in ordered
        ],
    )
    title = f"Where the time goes ({domain}, median per run)"
    return Section(title, Html(run_line(doc, domain) + bar_chart(title, bars) + body), "headline")


def run_line(doc: ProfileLike, domain: str) -> Html:
    """The run time in ``domain``: median and range over the measured runs."""
    times = [_run_time(run.timing, domain) or 0.0 for run in as_profile(doc).runs]
    spread = f"{ms(min(times))}–{ms(max(times))} ms over {len(times)} run(s)"
    return paragraph(f"Run time: median {ms(statistics.median(times))} ms ({spread}, {domain}).", css="lead")


def run_timing(doc: ProfileLike) -> Section:
    """The run statistics (median, p10, p90, CV of each timing), a chart of every run's time, and the runs' table."""
    record = as_profile(doc)
    parts = []
    if stats := {} if record.statistics is UNSET else given(record.statistics.runs, {}):
        parts.append(
            table(
                ["", "Median (ms)", "p10 (ms)", "p90 (ms)", "CV"],
                [(key.removesuffix("_us").replace("_", " "), *_spread(summary)) for key, summary in stats.items()],
            )
        )
    domain = "wall" if all(run.timing.wall_time_us is not UNSET for run in record.runs) else "cpu"
    bars = [
        Bar(f"run {run.run_index}", _run_time(run.timing, domain) or 0.0, f"{ms(_run_time(run.timing, domain))} ms")
        for run in record.runs
    ]
    if bars:
        parts.append(bar_chart(f"Each run's {domain} time", bars))
    runs = [
        (str(run.run_index), *(ms(_run_time(run.timing, key)) for key in ("wall", "cpu", "device")))
        for run in record.runs
    ]
    parts.append(table(["Run", "Wall (ms)", "CPU (ms)", "Device (ms)"], runs))
    return Section("Run timing", Html("".join(parts)), "runs")


def _run_time(timing: Timing, domain: str) -> float | None:
    """The run's time in ``domain`` (µs), ``wall`` too, which `time_in` does not know; None where it has none."""
    return given(timing.wall_time_us, None) if domain == "wall" else time_in(timing, domain)


def _spread(summary: Summary) -> tuple[str, str, str, str]:
    return ms(summary.median), ms(summary.p10), ms(summary.p90), percent(summary.cv)


def region_tree(doc: ProfileLike) -> Section:
    """The median run's region tree as nested ``<details>``: total, self time and share of each region."""
    runs = [run for run in as_profile(doc).runs if given(run.tree, [])]
    if not runs:
        return Section("Region tree", Html(""), "tree")
    run = median_run(runs)
    parts, shown = [], 0
    tree = given(run.tree, [])
    stack: list[tuple[TreeNode | None, int]] = [(node, 0) for node in reversed(tree)]
    while stack:  # without recursion: a tree nests as deep as its JSON
        node, depth = stack.pop()
        if node is None:
            parts.append("</details>")
            continue
        if shown == MAX_TREE_NODES:
            break
        shown += 1
        opened = " open" if depth < TREE_OPEN_DEPTH else ""
        parts.append(f"<details{opened}><summary>{_tree_label(node)}</summary>")
        stack.append((None, depth))
        stack += [(child, depth + 1) for child in reversed(node.children)]
    parts += ["</details>" for node, _ in stack if node is None]
    total = _count(tree)
    intro = paragraph(f"Run {run.run_index}, the median run: total and self CPU time, share of the run.")
    return Section(
        "Region tree",
        Html(intro + f'<div class="tree">{"".join(parts)}</div>' + _left_out(total - shown, "region")),
        "tree",
    )


def _tree_label(node: TreeNode) -> Html:
    figures = (
        f"{node.calls} call(s) · {ms(node.cpu_time_us)} ms total · {ms(node.cpu_self_time_us)} ms self · "
        f"{percent(node.cpu_time_fraction)}"
    )
    if node.device_time_us is not UNSET:
        figures += f" · device {ms(node.device_time_us)} ms"
    return Html(f'<span class="region">{name(node.region_id)}</span> <span class="figures">{text(figures)}</span>')


def _count(nodes: Sequence[TreeNode]) -> int:
    count, pending = 0, list(nodes)
    while pending:
        count += 1
        pending += pending.pop().children
    return count


def phases(doc: ProfileLike) -> Section:
    """A generate's phases (`aitune.report.section_rows`, as the Markdown): how they were found, the token
    figures, each phase's time, each region's share of every phase; empty for other documents."""
    figures = phase_table(doc)
    if not figures:
        return Section("Phases", Html(""), "phases")
    names, shares = phase_share_table(doc, text)
    body = (
        paragraph(*(line for line in (split_line(doc), tokens_line(doc)) if line))
        + table(PHASE_HEADER, figures)
        + table([PHASE_SHARE_TITLE, *names], shares)
        + paragraph(PHASE_RESIDUAL_NOTE, css="note")
    )
    return Section("Phases", Html(body), "phases")


def memory(doc: ProfileLike) -> Section:
    """Bytes allocated, freed and peak live per region and device, highest peaks first; why there are none."""
    if is_lite(doc):
        return Section("Memory", Html(""), "memory")
    rows, hidden = memory_table(doc, text)
    if not rows:
        return Section("Memory", paragraph(memory_note(doc) or ""), "memory")
    more = paragraph(f"… {hidden} more region row(s) with lower peaks.", css="cut") if hidden else ""
    return Section("Memory", Html(paragraph(memory_lead(doc)) + table(MEMORY_HEADER, rows) + more), "memory")


def efficiency(doc: ProfileLike) -> Section:
    """Each region's work, achieved rate and place under the machine's roofs; which regions are mostly uncounted."""
    if is_lite(doc):
        return Section("Work and efficiency", Html(""), "efficiency")
    if not has_work(doc):
        return Section("Work and efficiency", paragraph(NO_WORK), "efficiency")
    notes = [Html(f"{name(region)}: {text(note)}") for region, note in uncounted_notes(doc)]
    body = paragraph(*roof_lines(doc)) + table(EFFICIENCY_HEADER, efficiency_table(doc))
    return Section("Work and efficiency", Html(body + (paragraph(*notes) if notes else "")), "efficiency")


def operators(doc: ProfileLike) -> Section:
    """The profiler's top operators, by CPU total and by device total, as the document saved them."""
    parts = [
        f"<h3>{text(title[0].upper() + title[1:])}</h3>" + table(list(OPERATOR_HEADER), rows)
        for title, rows in operator_tables(doc)
    ]
    return Section("Operators", Html("".join(parts)), "operators")


def warnings(doc: ProfileLike) -> Section:
    """The document's warnings: code, source and message."""
    rows = [(w.code, w.source, name(w.message, MAX_MESSAGE_CHARS)) for w in as_profile(doc).warnings]
    body = table(["Code", "Source", "Message"], rows, css="text") if rows else paragraph("None.")
    return Section("Warnings", body, "warnings")


def environment(doc: ProfileLike) -> Section:
    """The versions and machine the profile was captured with, folded: the keys the model names, in its order
    (a capture writes them in that order), each nested block shown as its JSON's Python form."""
    record = as_profile(doc).environment
    items = {} if record is UNSET else json_form(record)
    rows = [
        (key, ", ".join(map(str, value)) if isinstance(value, list) else str(value)) for key, value in items.items()
    ]
    body = (
        Html(f"<details><summary>{len(rows)} entries</summary>{table(['Key', 'Value'], rows, css='text')}</details>")
        if rows
        else Html("")
    )
    return Section("Environment", body, "environment")


STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:0 16px 40px;color:#1b1f24}
h1{font-size:22px;margin:20px 0 4px}h3{font-size:15px}
h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d0d7de}
nav{font-size:13px;margin:8px 0}nav a{margin-right:12px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
th,td{padding:3px 8px;border-bottom:1px solid #eaeef2;text-align:left;vertical-align:top}
table.figures td+td,table.figures th+th{text-align:right;font-variant-numeric:tabular-nums}
td{word-break:break-word;max-width:640px}.lead{font-size:15px;font-weight:600}.cut,.note{color:#57606a;font-style:italic}
dl.facts{display:grid;grid-template-columns:max-content auto;gap:2px 16px}dt{color:#57606a}dd{margin:0}
.tree details{margin-left:18px}.tree>details{margin-left:0}.tree .figures{color:#57606a;font-size:12px}
.tree .region{font-family:ui-monospace,monospace}summary{cursor:pointer}
svg.chart{display:block;margin:8px 0;font-size:12px}svg .label{text-anchor:end;fill:#1b1f24}
svg .value,svg .axis{fill:#57606a}svg .bar,svg .dot{fill:#4c78a8}svg .spark{stroke:#4c78a8;stroke-width:1.5}
svg .before,svg .before-text{fill:#9fb4cc}svg .after,svg .after-text{fill:#e45756}
svg .whisker{stroke:#4c78a8;stroke-width:2}svg .reference{stroke:#57606a;stroke-dasharray:3 3}
.big{font-size:20px;font-weight:700}footer{margin-top:32px;color:#57606a;font-size:12px}
"""


def content_security_policy(style: str = STYLE) -> str:
    """No network load, no script, no plugin, no form; the one stylesheet allowed by its hash."""
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    return f"default-src 'none'; style-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"


def render_page(title: str, sections: Sequence[Section], subtitle: str = "") -> str:
    """The whole page: head with the policy and stylesheet, a contents line, the sections, and the size bound."""
    nav = " ".join(f'<a href="#s{index}">{text(section.title)}</a>' for index, section in enumerate(sections))
    body = "".join(
        f'<section id="s{index}" class="{section.kind}"><h2>{text(section.title)}</h2>{section.body}</section>'
        for index, section in enumerate(sections)
    )
    footer = (
        f"Written by aitune. Bounded: at most {MAX_TABLE_ROWS} rows a table, {MAX_TREE_NODES} regions in the tree, "
        f"names cut at {MAX_NAME_CHARS} characters; every cut says so. No script; nothing is loaded from the network."
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{content_security_policy()}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f'<meta name="referrer" content="no-referrer"><title>{text(title)}</title><style>{STYLE}</style></head>'
        f"<body><header><h1>{text(title)}</h1>{paragraph(subtitle, css='note') if subtitle else ''}"
        f"<nav>{nav}</nav></header>{body}<footer>{text(footer)}</footer></body></html>\n"
    )


def render_html(doc: ProfileLike, extra: Sequence[Section] = ()) -> str:
    """The report of one profile: its own sections, then ``extra`` ones (suggest's targets) before the environment."""
    sections = profile_sections(doc)
    if sections and sections[-1].kind == "environment":
        sections = [*sections[:-1], *extra, sections[-1]]
    else:
        sections = [*sections, *extra]
    return render_page("aitune profile", sections, subtitle=_target_name(as_profile(doc).target))
