"""The overview strip: run time before/after with spread, the speedup with its confidence interval,
the residual, and the regions that moved most. Pair numbers come from `aitune.compare` unchanged.
"""

from __future__ import annotations

import panel as pn

from aitune.compare import Change, ProfileDiff
from aitune.compare.end_to_end import captures_line
from aitune.compare.gains import speedup
from aitune.compare.loop_report import LoopReport
from aitune.compare.ranks import rank_lines
from aitune.report.formatting import MISSING, factor, ms, ms_spread, percent
from aitune.report.safe_text import html_text, shown_name
from aitune.viewer import tables
from aitune.viewer.store import ProfileStore
from aitune.viewer.tables import RESIDUAL, Column, time_column
from aitune.viewer.views import WRAPPED_TEXT, StoreView, table, text_block

TOP_MOVERS = 5
TITLES = {
    Column.PREDICTED_SPEEDUP: "predicted ×",
    Column.REALISED_SPEEDUP: "realised ×",
    Column.PREDICTED_REGION_SPEEDUP: "predicted, region ×",
    Column.REALISED_REGION_SPEEDUP: "realised, region ×",
    Column.TASK_GATE: "task gate",
}


def format_ms(us: float | None) -> str:
    """Microseconds as ``12.345 ms`` (`aitune.report.formatting.ms`); ``-`` when missing."""
    return MISSING if us is None else f"{ms(us)} ms"


def format_speedup(change: Change) -> str:
    """before ÷ after as ``1.85×``, with the interval ``[1.70, 2.01]`` when compare gave one; ``-`` when missing."""
    return factor(*speedup(change))


def spread(store: ProfileStore, side: str, metric: str) -> str:
    """``min–max`` of one side's per-run ``metric`` time in ms."""
    runs = store.run_table()
    values = runs.loc[runs[Column.SIDE] == side, time_column(metric)].dropna()
    return MISSING if values.empty else f"{ms_spread(values.min(), values.max())} ms"


def card(label: str, value: str, css_class: str) -> str:
    """One labelled figure as HTML; both strings are escaped."""
    return (
        f'<div class="aitune-card"><div class="aitune-card-label">{html_text(label)}</div>'
        f'<div class="{css_class}">{html_text(value)}</div></div>'
    )


def pair_cards(store: ProfileStore, diff: ProfileDiff) -> str:
    """The overview figures of a before/after pair."""
    domain = diff.domain
    noise = "beyond noise" if diff.run_time.beyond_noise else "within noise"
    return "".join(
        [
            card(f"before: median {domain} run time", format_ms(diff.run_time.before_us), "overview-before"),
            card("before: spread (min–max)", spread(store, "before", domain), "overview-before-spread"),
            card(f"after: median {domain} run time", format_ms(diff.run_time.after_us), "overview-after"),
            card("after: spread (min–max)", spread(store, "after", domain), "overview-after-spread"),
            card(f"speedup, 95% CI ({noise})", format_speedup(diff.run_time), "overview-speedup"),
            card(
                "residual before → after",
                f"{format_ms(diff.residual.before_us)} → {format_ms(diff.residual.after_us)}",
                "overview-residual",
            ),
        ]
    )


def movers(diff: ProfileDiff, limit: int = TOP_MOVERS) -> list[str]:
    """The headline's rows whose median time moved most (either way), as ``path: before → after`` lines.

    The headline's level, so blocks inside a module tuned as a whole do not crowd out the module
    itself, and a ``generate`` that spans the run shows as its parts and its own self time.
    """
    rows = [row for row in diff.headline if row.change.before_us is not None or row.change.after_us is not None]
    rows.sort(key=lambda row: -abs((row.change.after_us or 0.0) - (row.change.before_us or 0.0)))
    return [
        f"{shown_name(row.path)} ({row.status}): {format_ms(row.change.before_us)} → {format_ms(row.change.after_us)}"
        for row in rows[:limit]
    ]


def single_cards(store: ProfileStore) -> str:
    """The overview figures of one profile."""
    runs = store.run_table()
    regions = store.region_table("cpu")
    residual = regions.loc[regions[Column.REGION_ID] == RESIDUAL, Column.FRACTION]
    return "".join(
        [
            card("median wall run time", format_ms(runs[time_column("wall")].median()), "overview-before"),
            card("spread (min–max)", spread(store, "before", "wall"), "overview-before-spread"),
            card("measured runs", str(len(runs)), "overview-runs"),
            card(
                "residual (median share of CPU time)",
                percent(residual.iloc[0] if len(residual) else None),
                "overview-residual",
            ),
        ]
    )


class Overview(StoreView):
    """What moved and whether the numbers can be trusted, in one strip."""

    def __panel__(self) -> pn.viewable.Viewable:
        return self.rendered(self.store.param.compared, self.selection.param.domain)

    def _render(self, *_: object) -> pn.viewable.Viewable:
        names = " vs ".join(shown_name(loaded.name) for loaded in self.store.sides().values())
        if not names:
            return text_block("Open a profile from the runs folder, or upload one or two files.")
        if self.store.scenario:
            names += f" (scenario {shown_name(self.store.scenario)})"
        diff = self.store.comparison(self.selection.domain)
        if self.store.is_pair and diff is None:
            return pn.Column(text_block(names, "aitune-names"), text_block("Comparing with aitune.compare…"))
        cards = pair_cards(self.store, diff) if diff else single_cards(self.store)
        parts = [text_block(names, "aitune-names"), pn.pane.HTML(f'<div class="aitune-cards">{cards}</div>')]
        if diff:
            parts.append(text_block("Top movers:\n" + "\n".join(movers(diff))))
        return pn.Column(*parts, sizing_mode="stretch_width", css_classes=["overview"])


def tuned_line(report: LoopReport) -> str:
    """The end-to-end figure the tune folder's compare report verified, and the captures' figure labelled as theirs."""
    differ = captures_line(report.end_to_end, report.captures)
    return " ".join(
        [
            f"Tuned by aitune-profile tune: end to end {report.end_to_end.shown()} ({report.domain}, 95% CI);",
            f"the two captures: {factor(*report.captures)}{f'; {differ}' if differ else ''}.",
            *(line.rstrip(".") + "." for line in rank_lines(report.ranks)),  # under torchrun: ranks, then the job
            "Per tuned region, the gain suggest predicted and the gain measured (realised: verified in alternating "
            "rounds; region: its own speedup in the captures).",
        ]
    )


class TunedRegions(StoreView):
    """For a pair from a tune folder: per tuned region the winner, predicted and realised gain, and why one was
    kept as it was, from the folder's compare report; nothing for any other pair."""

    def __panel__(self) -> pn.viewable.Viewable:
        return self.rendered()

    def _render(self, *_: object) -> pn.viewable.Viewable:
        report = self.store.tune_report()
        if report is None:
            return pn.Spacer(height=0)
        rows = tables.gain_table(report)
        wrapped = {Column.NOTE: WRAPPED_TEXT, Column.TASK_GATE: WRAPPED_TEXT}  # the gate's verdict: text, escaped
        gains = table(rows, [Column.PATH, Column.WINNER], "gain-table", formatters=wrapped, titles=TITLES)
        line = text_block(tuned_line(report), "aitune-text tuned-speedup")
        return pn.Column(line, gains, sizing_mode="stretch_width")
