"""Terminal views (rich) of a profile, a diff and tuning suggestions: pure functions from data to renderables.

Every string that came from a document goes through `terminal_text`: never markup, control characters visible.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec
from rich.console import Group
from rich.table import Table
from rich.text import Text

from aitune.report.communication import COMMUNICATION_HEADERS, communication_summary
from aitune.report.document import LITE_LACKS, calls_note, is_lite, operator_runs_note
from aitune.report.efficiency import region_efficiencies
from aitune.report.formatting import MISSING, factor, ms, ms_change, ms_spread, percent, si, whole_percent
from aitune.report.headline import HeadlineRow, headline_rows, phase_rows
from aitune.report.memory import WHOLE_RUN, format_bytes, memory_note, memory_rows, memory_source, top_memory_rows
from aitune.report.model import DocumentWarning, ProfileLike, as_profile, given
from aitune.report.phases import phase_figures, split_line, tokens_line
from aitune.report.ranks import is_merged, rank_rows, regions_across_ranks
from aitune.report.safe_text import terminal_text
from aitune.report.samples import run_samples

if TYPE_CHECKING:  # each view imports its stage when it is called: `report` loads neither compare nor suggest
    from aitune.compare import Change, ProfileDiff
    from aitune.suggest import Suggestions, Target

TOP_REGIONS = 10
TOP_TARGETS = 15
PIPE_WIDTH = 200
"""Columns of output to a pipe or file: wide enough that a table row stays one line."""


def run_time_line(doc: ProfileLike, domain: str = "cpu") -> str:
    """``run time: median 1,763.921 ms (1,757.590–1,789.540 ms over 3 runs, cpu)``."""
    samples = run_samples(doc, domain)
    if not samples:
        return "run time: no measured runs"
    spread = f"{ms_spread(min(samples), max(samples))} ms over {len(samples)} run(s)"
    return f"run time: median {ms(statistics.median(samples))} ms ({spread}, {domain})"


def profile_summary(doc: ProfileLike, domain: str = "cpu", limit: int = TOP_REGIONS) -> Group:
    """The headline's rows by median time per run and share (`HeadlineRow.share`), then the residual and run time.

    The headline is the level where the run's time splits (see `aitune.report.headline`): with the
    residual it adds up to the run; nested regions are in the Markdown.
    """
    table = Table(title=terminal_text(f"Where the time goes ({domain}, median per run)"))
    for header in ("Region", "Median (ms)", "Share", "Min–max (ms)"):
        table.add_column(header, justify="left" if header == "Region" else "right")
    headline = headline_rows(doc, domain) if as_profile(doc).runs else []
    rows = sorted((row for row in headline if row.role != "residual"), key=lambda row: -statistics.median(row.times_us))
    for row in rows[:limit]:
        table.add_row(terminal_text(row.label), *_time_cells(row))
    if len(rows) > limit:
        table.add_row(terminal_text(f"… {len(rows) - limit} more region(s)"), "", "", "")
    for row in headline[-1:]:
        table.add_row(terminal_text(row.label, style="italic"), *_time_cells(row))
    lines = [terminal_text(run_time_line(doc, domain))]
    if is_lite(doc):
        lines.append(terminal_text(f"lite capture: {LITE_LACKS}"))
    if note := operator_runs_note(doc):
        lines.append(terminal_text(f"operator runs: {note}"))
    return Group(table, *lines)


def warnings_table(warnings: Sequence[DocumentWarning | Mapping[str, Any]], title: str = "Warnings") -> Table | None:
    """Code, source and message of each warning (a document's, or a diff's as it found them); ``None`` when
    there are none."""
    if not warnings:
        return None
    table = Table(title=terminal_text(title), show_lines=False)
    for header in ("Code", "Source", "Message"):
        table.add_column(header, overflow="fold")
    for item in msgspec.convert(warnings, list[DocumentWarning]):
        table.add_row(*(terminal_text(text) for text in (item.code, item.source, item.message)))
    return table


def communication_table(doc: ProfileLike) -> Table | None:
    """Communication per region, in the residual and per run (medians per run); ``None`` when the profile has none."""
    summary = communication_summary(doc)
    if summary is None:
        return None
    caption = None
    if summary.device_overlap_us is not None and summary.device_overlap_fraction is not None:
        overlap, share = ms(summary.device_overlap_us), summary.device_overlap_fraction
        caption = f"NCCL kernels beside compute kernels: {overlap} ms ({percent(share)} of their time)"
    table = Table(title=terminal_text("Communication (median per run)"), caption=caption)
    table.add_column("Region")
    for key in summary.keys:
        table.add_column(COMMUNICATION_HEADERS[key], justify="right")
    for row in summary.rows:
        cells = [f"{row.medians[key]:,.0f}" if key == "bytes" else ms(row.medians[key]) for key in summary.keys]
        table.add_row(terminal_text(row.label, style="" if row.role == "region" else "italic"), *cells)
    return table


def memory_view(doc: ProfileLike, limit: int = TOP_REGIONS) -> Any:
    """Bytes allocated, freed and peak live per region and device (highest peaks first), with where they come
    from; one line saying why when the document has none; None for a lite one (its summary says so)."""
    if is_lite(doc):
        return None
    rows = memory_rows(doc)
    if not rows:
        return terminal_text(f"memory: {memory_note(doc)}")
    shown, hidden = top_memory_rows(rows, limit)
    table = Table(title=terminal_text("Memory (allocated, freed: median per run; peaks: highest run)"))
    for header in ("Region", "Device", "Allocated", "Freed", "Peak live", "Allocator peak"):
        table.add_column(header, justify="left" if header in ("Region", "Device") else "right")
    for row in shown:
        table.add_row(
            terminal_text(row.label, style="italic" if row.role == "run" else ""),
            terminal_text(row.device),
            *(format_bytes(value) for value in (row.allocated_bytes, row.freed_bytes, row.peak_live_bytes)),
            format_bytes(row.allocator_peak_bytes),
        )
    if hidden:
        table.add_row(terminal_text(f"… {hidden} more region row(s)"), "", "", "", "", "")
    return Group(table, terminal_text(memory_source(doc) or ""))


def profile_view(doc: ProfileLike) -> Group:
    """The text report of a profile: overview, where the time goes, warnings."""
    record = as_profile(doc)
    target = given(record.target.script, None) or given(record.target.type, MISSING)
    overview = [
        terminal_text(
            f"aitune profile · target {target} · "
            f"created {record.created_at or MISSING} · aitune {record.aitune_version or MISSING}"
        ),
        terminal_text(
            f"warmup runs {given(record.config.warmup_runs, MISSING)} · measured runs {len(record.runs)} · "
            f"{len(record.regions)} region(s) observed"
        ),
        *([terminal_text(f"calls: {note}")] if (note := calls_note(doc)) else []),
    ]
    parts: list[Any] = [*overview, profile_summary(doc)]
    phases = phases_view(doc)
    if phases is not None:
        parts.append(phases)
    communication = communication_table(doc)
    if communication is not None:
        parts.append(communication)
    memory = memory_view(doc)
    if memory is not None:
        parts.append(memory)
    if is_merged(doc):
        parts.append(ranks_view(doc))
    efficiency = efficiency_table(doc)
    if efficiency is not None:
        parts.append(efficiency)
    warnings = warnings_table(record.warnings)
    if warnings is not None:
        parts.append(warnings)
    return Group(*parts)


def efficiency_table(doc: ProfileLike, limit: int = TOP_REGIONS) -> Table | None:
    """Each region's work and place under the roofs (`aitune.report.efficiency`); None without work."""
    found = region_efficiencies(doc)
    if not found:
        return None
    table = Table(title="Work and efficiency (operator runs; uncounted time has no formula, not zero work)")
    for header in ("Region", "FLOPs", "Achieved", "% of roof", "Bound", "Uncounted (ms)"):
        table.add_column(header, justify="left" if header in ("Region", "Bound") else "right")
    for item in found[:limit]:
        uncounted = ms(item.uncounted_us) + (" (mostly)" if item.mostly_uncounted else "")
        table.add_row(
            terminal_text(item.region_id),
            si(item.flops, "FLOP"),
            si(item.flops_per_s, "FLOP/s") if item.flops else MISSING,
            percent(item.fraction_of_roof),
            item.bound or MISSING,
            uncounted,
        )
    return table


def phases_view(doc: ProfileLike, limit: int = TOP_REGIONS) -> Group | None:
    """A generate-like profile's phases: each phase's time and share of the run, its largest regions, the
    token figures and how the split was decided (medians per run); None for other profiles."""
    figures = phase_figures(doc)
    if not figures:
        return None
    table = Table(title=terminal_text("Phases (cpu, median per run)"))
    for header in ("Phase", "Median (ms)", "Share", "Tokens", "Largest regions (share of the phase)"):
        table.add_column(header, justify="right" if header in ("Median (ms)", "Share", "Tokens") else "left")
    for figure in figures:
        rows = sorted(phase_rows(doc, figure.name), key=lambda row: -row.share)
        largest = ", ".join(f"{row.path} {whole_percent(row.share)}" for row in rows[:3])
        table.add_row(
            figure.name, ms(figure.median_us), percent(figure.share), str(figure.steps), terminal_text(largest)
        )
    lines = [terminal_text(line) for line in (tokens_line(doc), split_line(doc)) if line]
    return Group(table, *lines)


def ranks_view(doc: ProfileLike, limit: int = TOP_REGIONS) -> Group:
    """A merged document's ranks: each rank's step times, then each region's median per rank, largest first."""
    ranks = as_profile(doc).ranks
    assert ranks is not msgspec.UNSET, "ranks_view takes a merged document (is_merged)"
    table = Table(title=terminal_text(f"Ranks ({ranks.domain}, {ranks.world_size} ranks, median per run)"))
    for header in ("Rank", "Median (ms)", "Min–max (ms)", "Barrier wait (ms)", "Slowest in", "Straggler in"):
        table.add_column(header, justify="left" if header in ("Rank", "Straggler in") else "right")
    for row in rank_rows(doc):
        table.add_row(
            str(row.rank),
            ms(row.median_us),
            ms_spread(row.min_us, row.max_us),
            ms(row.barrier_wait_us),
            f"{row.slowest_steps} step(s)",
            terminal_text(row.straggler_region or MISSING),
        )
    regions = Table(title=terminal_text("Regions across ranks (median per run of each rank)"))
    for header in ("Region", "Slowest rank", "Slowest (ms)", "Median rank (ms)", "Imbalance"):
        regions.add_column(header, justify="left" if header == "Region" else "right")
    rows = regions_across_ranks(doc)
    for row in rows[:limit]:
        regions.add_row(
            terminal_text(row.region_id),
            str(row.slowest_rank),
            ms(row.max_us),
            ms(statistics.median(row.medians_us)),
            factor(row.imbalance),
        )
    if len(rows) > limit:
        regions.add_row(terminal_text(f"… {len(rows) - limit} more region(s)"), "", "", "", "")
    balance = factor(given(ranks.run_time.imbalance, None))
    line = (
        f"merged: each run is its step's slowest rank; run time imbalance (max ÷ median across ranks) {balance}, "
        f"critical rank {ranks.critical_rank}"
    )
    return Group(table, regions, terminal_text(line))


def diff_view(diff: ProfileDiff) -> Group:
    """Run time, residual and regions before/after with speedups, then operators and one-sided warnings."""
    scenario = f", scenario {diff.scenario}" if diff.scenario else ""
    table = Table(
        title=terminal_text(f"Before → after ({diff.domain}, median per run{scenario})"),
        caption=f"speedup = before ÷ after; [95% bootstrap CI]; runs {diff.runs[0]} → {diff.runs[1]}",
    )
    for header in ("Region", "Before (ms)", "After (ms)", "Speedup [95% CI]", "Status"):
        table.add_column(header, justify="left" if header in ("Region", "Status") else "right")
    table.add_row(terminal_text("run time", style="bold"), *_change_cells(diff.run_time), "")
    table.add_row(terminal_text("(residual)", style="italic"), *_change_cells(diff.residual), "")
    for row in diff.regions:
        label = terminal_text(f"{row.path} (kind changed)" if row.kind_changed else row.path)
        table.add_row(label, *_change_cells(row.change), terminal_text(row.status))
    from aitune.compare.gains import speedup_line

    parts: list[Any] = [table, terminal_text(speedup_line(diff.run_time))]
    if any(diff.world_sizes):
        parts.append(terminal_text(merged_line(diff.world_sizes)))
    if diff.phases:
        parts.append(_phase_table(diff))
    if diff.operators:
        parts.append(_operator_table(diff))
    parts += _memory_diff(diff)
    for side, items in (("before", diff.warnings_only_before), ("after", diff.warnings_only_after)):
        warnings = warnings_table(items, title=f"Warnings only {side}")
        if warnings is not None:
            parts.append(warnings)
    return Group(*parts)


def _phase_table(diff: ProfileDiff) -> Table:
    """Each phase both sides have, its regions and residual below it, then the token figures."""
    table = Table(title=terminal_text("Phases before → after (cpu, median per run)"))
    for header in ("Phase", "Before (ms)", "After (ms)", "Speedup [95% CI]"):
        table.add_column(header, justify="left" if header == "Phase" else "right")
    for phase in diff.phases:
        table.add_row(terminal_text(phase.name, style="bold"), *_change_cells(phase.change))
        for region in phase.regions:
            table.add_row(terminal_text(f"  {region.path}"), *_change_cells(region.change))
    names = {"ttft_us": "time to first token", "per_output_token_us": "per output token"}
    for token in diff.tokens:
        table.add_row(terminal_text(names[token.figure], style="italic"), *_change_cells(token.change))
    return table


def merged_line(world_sizes: tuple[int | None, int | None]) -> str:
    """What a comparison of merged documents compares: each side's step time is its slowest rank's."""
    sides = " → ".join(f"{size} ranks merged" if size else "one process" for size in world_sizes)
    return f"comparing merged documents ({sides}): each run is its step's slowest rank, as `merge` wrote it"


def _memory_diff(diff: ProfileDiff, limit: int = TOP_REGIONS) -> list[Any]:
    """Peak live and allocated bytes per region and device before → after, and a line for a side without memory."""
    parts: list[Any] = []
    for side, note in zip(("before", "after"), diff.memory_notes, strict=True):
        if note is not None:
            parts.append(terminal_text(f"memory {side}: {note}"))
    if not diff.memory:
        return parts
    table = Table(title="Memory (peak live: highest run; allocated: median per run)")
    for header in ("Region", "Device", "Peak before", "Peak after", "Δ peak", "Allocated before", "Allocated after"):
        table.add_column(header, justify="left" if header in ("Region", "Device") else "right")
    for row in diff.memory[: limit + 1]:
        delta = row.peak_delta_bytes
        table.add_row(
            terminal_text(row.path, style="italic" if row.path == WHOLE_RUN else ""),
            terminal_text(row.device),
            format_bytes(row.before_peak_bytes),
            format_bytes(row.after_peak_bytes),
            MISSING if delta is None else ("+" if delta > 0 else "") + format_bytes(delta),
            format_bytes(row.before_allocated_bytes),
            format_bytes(row.after_allocated_bytes),
        )
    return [table, *parts]


def _operator_table(diff: ProfileDiff) -> Table:
    table = Table(title=f"Top operators (self {diff.domain} time per run)")
    for header in ("Operator", "Before (ms)", "After (ms)", "Δ (ms)"):
        table.add_column(header, justify="left" if header == "Operator" else "right", overflow="fold")
    for row in diff.operators:
        table.add_row(terminal_text(row.key), ms(row.before_us), ms(row.after_us), ms_change(row.delta_us))
    return table


def _change_cells(change: Change) -> tuple[str, str, str]:
    from aitune.compare.gains import change_speedup

    return ms(change.before_us), ms(change.after_us), change_speedup(change)


def _time_cells(row: HeadlineRow) -> tuple[str, str, str]:
    times = row.times_us
    return ms(statistics.median(times)), percent(row.share), ms_spread(min(times), max(times))


def suggestions_view(suggestions: Suggestions, limit: int = TOP_TARGETS) -> Group:
    """The ranked targets as a table, then what to tune with the reasons why, then the advice beyond modules.

    Paths, types and messages come from the profile: they are shown through `terminal_text`, never as markup.
    """
    from aitune.suggest.gain import speedup_text

    picked = suggestions.recommended()
    scenario = f", scenario {suggestions.scenario}" if suggestions.scenario else ""
    table = Table(
        title=terminal_text(
            f"Tuning targets ({suggestions.domain}, median run {ms(suggestions.run_time_us)} ms{scenario})"
        ),
        caption="bound: end to end if the region took no time · predicted: by the gain model (docs/gain-model.md)",
    )
    table.add_column("Path", no_wrap=True)
    for header in ("Share", "ms/run", "Calls", "Bound", "Predicted"):
        table.add_column(header, justify="right")
    table.add_column("Verdict", no_wrap=True)
    for target in suggestions.targets[:limit]:
        table.add_row(
            terminal_text(target.path),
            percent(target.share),
            ms(target.time_per_run_us),
            f"{target.calls_per_run:g}",
            speedup_text(target.upper_bound_speedup),
            speedup_text(target.predicted_speedup),
            terminal_text(suggestions.verdict(target, picked)),
        )
    if len(suggestions.targets) > limit:
        table.add_row(terminal_text(f"… {len(suggestions.targets) - limit} more target(s)"), *[""] * 6)
    correction = [Text(suggestions.correction.line())] if suggestions.correction else []
    return Group(
        table,
        *correction,
        *_recommendation_lines(suggestions, picked),
        *_precision_lines(suggestions),
        *_advice_lines(suggestions),
    )


def _precision_lines(suggestions: Suggestions) -> list[Text]:
    """``bf16: encoder 2.10× (region); likely to fail the task gate: …`` per target, or why it is refused."""
    if not suggestions.precision:
        return []
    refused = suggestions.precision[0].refused
    if refused is not None:
        return [terminal_text(f"{suggestions.precision[0].precision} brings nothing here: {refused}.")]
    lines = []
    for item in suggestions.precision[:TOP_TARGETS]:
        risk = f"; {item.risk}" if item.risk else ""
        lines.append(
            terminal_text(f"{item.precision}: {item.path} {factor(item.predicted_region_speedup)} (region){risk}")
        )
    return lines


def _recommendation_lines(suggestions: Suggestions, picked: list[Target]) -> list[Text]:
    from aitune.suggest.gain import speedup_text

    if not suggestions.targets:
        return [terminal_text("Nothing to tune: no region is named by a module path that wrap or --targets take.")]
    if not picked:
        return [terminal_text("Nothing to tune: no region passes; the Verdict column says why for each.")]
    lines = [terminal_text("Tune, best first:", style="bold")]
    for rank, target in enumerate(picked, 1):
        lines.append(
            terminal_text(
                f"{rank}. {target.path} — {percent(target.share)} of the run, {ms(target.time_per_run_us)} ms a run in "
                f"{target.calls_per_run:g} call(s): predicted {factor(target.predicted_speedup)} end to end "
                f"({factor(target.predicted_region_speedup)} for it), "
                f"at most {speedup_text(target.upper_bound_speedup)}."
            )
        )
        lines += [terminal_text(f"   {reason.code}: {reason.message}") for reason in target.reasons]
    predicted, bound = suggestions.combined(picked)
    if len(picked) > 1:
        together = (
            f"All {len(picked)} together: predicted {factor(predicted)} end to end, at most {speedup_text(bound)}."
        )
        lines.append(terminal_text(together))
    return lines


def _advice_lines(suggestions: Suggestions) -> list[Text]:
    if not suggestions.advice:
        return []
    lines = [terminal_text(f"- {advice.code}: {advice.message}") for advice in suggestions.advice]
    return [terminal_text("Beyond modules:", style="bold"), *lines]
