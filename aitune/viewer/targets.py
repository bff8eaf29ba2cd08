"""The suggestions tab: what `aitune.suggest` would tune in one profile, or next in a pair's after side.

Every figure is suggest's own (`aitune.viewer.tables.target_table` only arranges them); paths and
messages come from the profile and reach the page as escaped text.
"""

from __future__ import annotations

import panel as pn

from aitune.report.formatting import factor, ms
from aitune.report.safe_text import shown_name
from aitune.suggest import UPPER_BOUND_CAP, Suggestions
from aitune.viewer import tables
from aitune.viewer.tables import Column
from aitune.viewer.views import WRAPPED_TEXT, StoreView, speedup_format, table, text_block

TITLES = {
    Column.SHARE_LOW: "min",
    Column.SHARE_HIGH: "max",
    Column.TIME_PER_RUN_US: "µs per run",
    Column.CALLS_PER_RUN: "calls",
    Column.UPPER_BOUND_SPEEDUP: "upper bound ×",
    Column.PREDICTED_SPEEDUP: "predicted ×",
    Column.PREDICTED_REGION_SPEEDUP: "for the region ×",
}
NOTE = (
    "share: median of the region's time ÷ the run's, with its min and max over the runs · "
    "upper bound: end to end if the region took no time · predicted: end to end (and for the region alone) "
    "by the gain model (host overhead removed, arithmetic sped up; docs/gain-model.md) · speedups are before ÷ after."
)


def heading(store_side: str, name: str, found: Suggestions) -> str:
    """What the tab shows, of which profile, in which domain and against which median run."""
    what = "What to tune next, in the after profile" if store_side == "after" else "What to tune"
    return f"{what} {shown_name(name)} ({found.domain}, median run {ms(found.run_time_us)} ms)."


def picked_line(found: Suggestions) -> str:
    """The targets suggest would tune, best first, with what each and all of them would give end to end."""
    picked = found.recommended()
    if not picked:
        return "Nothing to tune: no region passes; the verdict column says why for each."
    parts = ", ".join(f"{shown_name(target.path)} ({factor(target.predicted_speedup)})" for target in picked)
    predicted, bound = found.combined(picked)
    bound_text = "unbounded" if bound >= UPPER_BOUND_CAP else f"at most {factor(bound)}"
    return f"Tune, best first: {parts}; together predicted {factor(predicted)} end to end, {bound_text}."


class TuningTargets(StoreView):
    """suggest's ranked targets as a table, what it would tune, every target's reasons and the advice."""

    def __panel__(self) -> pn.viewable.Viewable:
        return self.rendered(self.selection.param.domain)

    def _render(self, *_: object) -> pn.viewable.Viewable:
        found = self.store.suggestions(self.selection.domain)
        side = self.store.suggested_side
        if found is None:
            return text_block("Open a profile to see what to tune in it.")
        targets = table(
            tables.target_table(found),
            [Column.PATH, Column.VERDICT],
            "target-table",
            formatters={Column.UPPER_BOUND_SPEEDUP: speedup_format("∞")},
            titles=TITLES,
        )
        parts = [
            text_block(heading(side, self.store.sides()[side].name, found)),
            targets,
            text_block(NOTE),
            text_block(picked_line(found), "aitune-text suggest-picked"),
            pn.pane.Markdown("**Why**, per target"),
            table(
                tables.reason_table(found),
                [Column.PATH, Column.CODE],
                "reason-table",
                formatters={Column.MESSAGE: WRAPPED_TEXT},
            ),
        ]
        advice = tables.advice_table(found)
        if not advice.empty:
            advice_rows = table(advice, [Column.CODE], "advice-table", formatters={Column.MESSAGE: WRAPPED_TEXT})
            parts += [pn.pane.Markdown("**Beyond modules**"), advice_rows]
        return pn.Column(*parts, sizing_mode="stretch_width")
