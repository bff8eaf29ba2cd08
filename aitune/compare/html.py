"""The HTML report's pair sections: the speedup with its interval, each region's change, operators and warnings
on one side only; for a tune folder, each tuned region's predicted and realised gain.

Figures come from `aitune.compare.ProfileDiff` (and a tune folder's `LoopReport`) unchanged, worded as
the terminal words them (`change_speedup`, `speedup_line`); names pass through `aitune.report.html`'s helpers.
"""

from __future__ import annotations

import msgspec

from aitune.compare.change import Change
from aitune.compare.diff import ProfileDiff
from aitune.compare.end_to_end import captures_line
from aitune.compare.gains import change_speedup, speedup, speedup_line
from aitune.compare.loop_report import LoopReport
from aitune.report.formatting import factor, ms, ms_change
from aitune.report.html import MAX_MESSAGE_CHARS, Html, Section, facts_list, name, paragraph, table
from aitune.report.model import DocumentWarning
from aitune.report.svg import Interval, Pair, interval_chart, pair_chart


def pair_sections(diff: ProfileDiff, report: LoopReport | None = None) -> list[Section]:
    """The speedup, a tune folder's gains (with ``report``), the regions' changes, operators, one-sided warnings."""
    sections = [speedup_section(diff, report)]
    if report is not None:
        sections.append(tuned_section(report))
    sections += [headline_changes(diff), region_changes(diff), operator_changes(diff), one_sided_warnings(diff)]
    return [section for section in sections if section.body]


def speedup_section(diff: ProfileDiff, report: LoopReport | None = None) -> Section:
    """The run's speedup (before ÷ after) with its interval, the median run times and the run counts; for a tune
    folder (``report``), the end-to-end figure it verified leads and the captures' figure is labelled as theirs."""
    run = diff.run_time
    verdict = (
        "beyond noise (the interval excludes 1)" if run.beyond_noise else "not beyond noise (the interval holds 1)"
    )
    scenario = f", scenario {diff.scenario}" if diff.scenario else ""
    captures = "Speedup of the two captures" if report is not None else "Speedup"
    facts = [
        ("Run time", f"{ms(run.before_us)} → {ms(run.after_us)} ms (median per run, {diff.domain}{scenario})"),
        (f"{captures} before ÷ after [95% CI]", f"{change_speedup(run)}: {verdict}"),
        ("Time outside every region", f"{ms(diff.residual.before_us)} → {ms(diff.residual.after_us)} ms"),
        ("Measured runs", f"{diff.runs[0]} → {diff.runs[1]}"),
    ]
    if report is None:
        return Section("Speedup", Html(paragraph(speedup_line(run), css="big") + facts_list(facts)), "speedup")
    differ = captures_line(report.end_to_end, report.captures)
    lead = paragraph(f"End to end: {report.end_to_end.shown()}", css="big")
    return Section("Speedup", Html(lead + facts_list(facts) + (paragraph(differ) if differ else "")), "speedup")


def tuned_section(report: LoopReport) -> Section:
    """What the tune folder's report says of each region it tried: backend, predicted and realised gains, note."""
    rows = [
        (
            gain.path or "(whole model)",
            gain.winner,
            factor(gain.predicted_speedup),
            *(factor(value) for value in gain.realised_shown),
            name(gain.note, MAX_MESSAGE_CHARS),
        )
        for gain in report.regions
    ]
    header = ["Region", "Backend", "Predicted", "Realised (verified)", "Own speedup (captures)", "Note"]
    lead = paragraph(
        f"End to end: {report.end_to_end.shown()} ({report.domain}; speedup = before ÷ after).", css="lead"
    )
    return Section("Tuned regions", Html(lead + table(header, rows)), "tuned")


def headline_changes(diff: ProfileDiff) -> Section:
    """The headline's rows (where the run's time splits) before and after: a chart of the medians, one of the ratios."""
    rows = diff.headline
    pairs = [Pair(row.path, row.change.before_us, row.change.after_us, _pair_text(row.change)) for row in rows]
    intervals = [
        Interval(label, *speedup(change), change_speedup(change))
        for label, change in [("run time", diff.run_time), ("(residual)", diff.residual)]
        + [(row.path, row.change) for row in rows]
        if change.ratio is not None
    ]
    body = pair_chart("Median time per run, before and after", pairs)
    body += interval_chart("Speedup before ÷ after with its 95% interval (right of 1: faster)", intervals)
    return Section(f"Where the time went ({diff.domain})", Html(body), "headline-changes")


def region_changes(diff: ProfileDiff) -> Section:
    """Every region of either side (nested ones included), largest first, with run time and residual on top."""
    rows = [
        ("run time", *_cells(diff.run_time), ""),
        ("(residual)", *_cells(diff.residual), ""),
        *(
            (f"{row.path} (kind changed)" if row.kind_changed else row.path, *_cells(row.change), row.status)
            for row in diff.regions
        ),
    ]
    note = paragraph("ratio = after ÷ before; [95% bootstrap CI]; a region on one side only is added or removed.")
    body = note + table(["Region", "Before (ms)", "After (ms)", "Ratio [95% CI]", "Status"], rows)
    return Section("Per-region changes", Html(body), "regions")


def operator_changes(diff: ProfileDiff) -> Section:
    """The top operators' self time per run on each side."""
    rows = [
        (
            row.key,
            ms(row.before_us),
            ms(row.after_us),
            ms_change(row.delta_us),
        )
        for row in diff.operators
    ]
    body = table(["Operator", "Before (ms)", "After (ms)", "Δ (ms)"], rows) if rows else Html("")
    return Section(f"Top operators (self {diff.domain} time per run)", body, "operators")


def one_sided_warnings(diff: ProfileDiff) -> Section:
    """Warnings whose code one side alone has."""
    parts = []
    for side, items in (("before", diff.warnings_only_before), ("after", diff.warnings_only_after)):
        warnings = msgspec.convert(items, list[DocumentWarning])  # the document's dicts, read as the model reads them
        rows = [(w.code, w.source, name(w.message, MAX_MESSAGE_CHARS)) for w in warnings]
        if rows:
            parts.append(f"<h3>Only {side}</h3>" + table(["Code", "Source", "Message"], rows, css="text"))
    return Section("Warnings on one side only", Html("".join(parts)), "warnings")


def _cells(change: Change) -> tuple[str, str, str]:
    return ms(change.before_us), ms(change.after_us), change_speedup(change)


def _pair_text(change: Change) -> str:
    return f"{ms(change.before_us)} → {ms(change.after_us)} ms"
