"""The HTML report's suggestions section: the ranked targets, what to tune with the reasons why, and the advice.

Figures come from `aitune.suggest.Suggestions` unchanged and are worded as the terminal words them
(`aitune.suggest.gain.speedup_text`, `aitune.report.markdown.ms`); every path and message passes
through `aitune.report.html`'s escaping helpers.
"""

from __future__ import annotations

from aitune.report.formatting import factor, ms, percent
from aitune.report.html import MAX_MESSAGE_CHARS, Html, Section, name, paragraph, table, text
from aitune.report.svg import Bar, bar_chart
from aitune.suggest import Suggestions, Target
from aitune.suggest.gain import speedup_text

TOP_TARGETS = 50
"""Most targets the section's table lists (`aitune.report.html.MAX_TABLE_ROWS` bounds any table)."""


def suggestions_section(suggestions: Suggestions) -> Section:
    """Targets as a chart of predicted speedups and a table, the picked ones with their reasons, then advice."""
    picked = suggestions.recommended()
    scenario = f", scenario {suggestions.scenario}" if suggestions.scenario else ""
    lead = paragraph(
        f"Median run {ms(suggestions.run_time_us)} ms ({suggestions.domain}{scenario}). Bound: end to end if the "
        "region took no time; predicted: by the gain model (docs/gain-model.md).",
        css="note",
    )
    rows = [
        (
            target.path,
            percent(target.share),
            ms(target.time_per_run_us),
            f"{target.calls_per_run:g}",
            speedup_text(target.upper_bound_speedup),
            speedup_text(target.predicted_speedup),
            suggestions.verdict(target, picked),
        )
        for target in suggestions.targets
    ]
    header = ["Path", "Share", "ms/run", "Calls", "Bound", "Predicted", "Verdict"]
    chart = bar_chart(
        "Predicted end-to-end speedup of each target",
        [Bar(target.path, target.predicted_speedup - 1, speedup_text(target.predicted_speedup)) for target in picked],
    )
    parts = [lead, chart if picked else "", table(header, rows, limit=TOP_TARGETS), _picked(suggestions, picked)]
    if suggestions.advice:
        items = "".join(
            f"<li><b>{text(item.code)}</b>: {name(item.message, MAX_MESSAGE_CHARS)}</li>" for item in suggestions.advice
        )
        parts.append(f"<h3>Beyond modules</h3><ul>{items}</ul>")
    return Section("Suggestions: what to tune", Html("".join(parts)), "suggestions")


def _picked(suggestions: Suggestions, picked: list[Target]) -> Html:
    if not suggestions.targets:
        return paragraph("Nothing to tune: no region is named by a module path that wrap or --targets take.")
    if not picked:
        return paragraph("Nothing to tune: no region passes; the Verdict column says why for each.")
    items = "".join(
        f"<li><b>{name(target.path)}</b> — predicted {text(speedup_text(target.predicted_speedup))} end to end "
        f"({factor(target.predicted_region_speedup)} for it), at most {text(speedup_text(target.upper_bound_speedup))}"
        + "<ul>"
        + "".join(
            f"<li>{text(reason.code)}: {name(reason.message, MAX_MESSAGE_CHARS)}</li>" for reason in target.reasons
        )
        + "</ul></li>"
        for target in picked
    )
    together = ""
    if len(picked) > 1:
        predicted, bound = suggestions.combined(picked)
        together = paragraph(
            f"All {len(picked)} together: predicted {factor(predicted)} end to end, at most {speedup_text(bound)}."
        )
    return Html(f"<h3>Tune, best first</h3><ol>{items}</ol>{together}")
