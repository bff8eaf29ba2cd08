"""Terminal views (rich) of a profile, a diff and tuning suggestions: pure functions from data to renderables."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from aitune.compare import Change, ProfileDiff, run_samples
from aitune.report.headline import headline_rows
from aitune.suggest import UPPER_BOUND_CAP, Suggestions, Target

MISSING = "-"
TOP_REGIONS = 10
TOP_TARGETS = 15


def ms(value_us: float | None) -> str:
    """Microseconds as milliseconds, ``-`` when absent."""
    return MISSING if value_us is None else f"{value_us / 1000:,.3f}"


def ratio_text(change: Change) -> str:
    """``1.043× [0.998, 1.087]``: the ratio and its confidence interval, as far as they exist."""
    if change.ratio is None:
        return MISSING
    if change.ci_low is None or change.ci_high is None:
        return f"{change.ratio:.3f}×"
    return f"{change.ratio:.3f}× [{change.ci_low:.3f}, {change.ci_high:.3f}]"


def run_time_line(doc: Mapping[str, Any], domain: str = "cpu") -> str:
    """``run time: median 1,763.921 ms (1,757.590–1,789.540 ms over 3 runs, cpu)``."""
    samples = run_samples(doc, domain)
    if not samples:
        return "run time: no measured runs"
    spread = f"{ms(min(samples))}–{ms(max(samples))} ms over {len(samples)} run(s)"
    return f"run time: median {ms(statistics.median(samples))} ms ({spread}, {domain})"


def profile_summary(doc: Mapping[str, Any], domain: str = "cpu", limit: int = TOP_REGIONS) -> Group:
    """The headline's rows by median time per run, with their share of the median run, then the residual and run time.

    The headline is the level where the run's time splits (see `aitune.report.headline`): with the
    residual it adds up to the run; nested regions are in the Markdown.
    """
    run_median = statistics.median(run_samples(doc, domain)) if doc["runs"] else 0.0
    table = Table(title=f"Where the time goes ({domain}, median per run)")
    for header in ("Region", "Median (ms)", "Share", "Min–max (ms)"):
        table.add_column(header, justify="left" if header == "Region" else "right")
    headline = headline_rows(doc, domain) if doc["runs"] else []
    rows = sorted((row for row in headline if row.role != "residual"), key=lambda row: -statistics.median(row.times_us))
    for row in rows[:limit]:
        table.add_row(Text(row.label), *_time_cells(row.times_us, run_median))
    if len(rows) > limit:
        table.add_row(f"… {len(rows) - limit} more region(s)", "", "", "")
    for row in headline[-1:]:
        table.add_row(Text(row.label, style="italic"), *_time_cells(row.times_us, run_median))
    return Group(table, Text(run_time_line(doc, domain)))


def warnings_table(warnings: list[Mapping[str, Any]], title: str = "Warnings") -> Table | None:
    """Code, source and message of each warning; ``None`` when there are none."""
    if not warnings:
        return None
    table = Table(title=title, show_lines=False)
    for header in ("Code", "Source", "Message"):
        table.add_column(header, overflow="fold")
    for item in warnings:
        table.add_row(item["code"], item.get("source", MISSING), item["message"])
    return table


def profile_view(doc: Mapping[str, Any]) -> Group:
    """The text report of a profile: overview, where the time goes, warnings."""
    config, target = doc.get("config", {}), doc.get("target", {})
    overview = Text(
        f"aitune profile · target {target.get('script') or target.get('type', MISSING)} · "
        f"created {doc.get('created_at') or MISSING} · aitune {doc.get('aitune_version') or MISSING}\n"
        f"warmup runs {config.get('warmup_runs', MISSING)} · measured runs {len(doc['runs'])} · "
        f"{len(doc.get('regions', []))} region(s) observed"
    )
    parts: list[Any] = [overview, profile_summary(doc)]
    warnings = warnings_table(doc.get("warnings", []))
    if warnings is not None:
        parts.append(warnings)
    return Group(*parts)


def diff_view(diff: ProfileDiff) -> Group:
    """Run time, residual and regions before/after with ratios, then operators and one-sided warnings."""
    scenario = f", scenario {diff.scenario}" if diff.scenario else ""
    table = Table(
        title=f"Before → after ({diff.domain}, median per run{scenario})",
        caption=f"ratio = after ÷ before; [95% bootstrap CI]; runs {diff.runs[0]} → {diff.runs[1]}",
    )
    for header in ("Region", "Before (ms)", "After (ms)", "Ratio [95% CI]", "Status"):
        table.add_column(header, justify="left" if header in ("Region", "Status") else "right")
    table.add_row(Text("run time", style="bold"), *_change_cells(diff.run_time), "")
    table.add_row(Text("(residual)", style="italic"), *_change_cells(diff.residual), "")
    for row in diff.regions:
        label = Text(f"{row.path} (kind changed)" if row.kind_changed else row.path)
        table.add_row(label, *_change_cells(row.change), row.status)
    parts: list[Any] = [table]
    if diff.operators:
        parts.append(_operator_table(diff))
    for side, items in (("before", diff.warnings_only_before), ("after", diff.warnings_only_after)):
        warnings = warnings_table(items, title=f"Warnings only {side}")
        if warnings is not None:
            parts.append(warnings)
    return Group(*parts)


def _operator_table(diff: ProfileDiff) -> Table:
    table = Table(title=f"Top operators (self {diff.domain} time per run)")
    for header in ("Operator", "Before (ms)", "After (ms)", "Δ (ms)"):
        table.add_column(header, justify="left" if header == "Operator" else "right", overflow="fold")
    for row in diff.operators:
        delta = MISSING if row.delta_us is None else f"{row.delta_us / 1000:+,.3f}"
        table.add_row(row.key, ms(row.before_us), ms(row.after_us), delta)
    return table


def _change_cells(change: Change) -> tuple[str, str, str]:
    return ms(change.before_us), ms(change.after_us), ratio_text(change)


def _time_cells(times: list[float], run_median: float) -> tuple[str, str, str]:
    median = statistics.median(times)
    share = f"{median / run_median:.1%}" if run_median > 0 else MISSING
    return ms(median), share, f"{ms(min(times))}–{ms(max(times))}"


def suggestions_view(suggestions: Suggestions, limit: int = TOP_TARGETS) -> Group:
    """The ranked targets as a table, then what to tune with the reasons why, then the advice beyond modules.

    Paths, types and messages come from the profile: they are shown as `Text`, never as markup.
    """
    picked = suggestions.recommended()
    scenario = f", scenario {suggestions.scenario}" if suggestions.scenario else ""
    table = Table(
        title=Text(f"Tuning targets ({suggestions.domain}, median run {ms(suggestions.run_time_us)} ms{scenario})"),
        caption="bound: end to end if the region took no time · predicted: with the speedups measured on CPU",
    )
    table.add_column("Path", no_wrap=True)
    for header in ("Share", "ms/run", "Calls", "Bound", "Predicted"):
        table.add_column(header, justify="right")
    table.add_column("Verdict", no_wrap=True)
    for target in suggestions.targets[:limit]:
        table.add_row(
            Text(target.path),
            f"{target.share:.1%}",
            ms(target.time_per_run_us),
            f"{target.calls_per_run:g}",
            _speedup(target.upper_bound_speedup),
            _speedup(target.predicted_speedup),
            Text(suggestions.verdict(target, picked)),
        )
    if len(suggestions.targets) > limit:
        table.add_row(Text(f"… {len(suggestions.targets) - limit} more target(s)"), *[""] * 6)
    return Group(table, *_recommendation_lines(suggestions, picked), *_advice_lines(suggestions))


def _speedup(value: float) -> str:
    return "∞" if value >= UPPER_BOUND_CAP else f"{value:.3f}×"


def _recommendation_lines(suggestions: Suggestions, picked: list[Target]) -> list[Text]:
    if not picked:
        return [Text("Nothing to tune: no region passes; the Verdict column says why for each.")]
    lines = [Text("Tune, best first:", style="bold")]
    for rank, target in enumerate(picked, 1):
        lines.append(
            Text(
                f"{rank}. {target.path} — {target.share:.1%} of the run, {ms(target.time_per_run_us)} ms a run in "
                f"{target.calls_per_run:g} call(s): predicted {target.predicted_speedup:.3f}× end to end "
                f"({target.predicted_region_speedup:.2f}× for it), at most {_speedup(target.upper_bound_speedup)}."
            )
        )
        lines += [Text(f"   {reason.code}: {reason.message}") for reason in target.reasons]
    predicted, bound = suggestions.combined(picked)
    if len(picked) > 1:
        together = f"All {len(picked)} together: predicted {predicted:.3f}× end to end, at most {_speedup(bound)}."
        lines.append(Text(together))
    return lines


def _advice_lines(suggestions: Suggestions) -> list[Text]:
    if not suggestions.advice:
        return []
    return [Text("Beyond modules:", style="bold")] + [Text(f"- {a.code}: {a.message}") for a in suggestions.advice]
