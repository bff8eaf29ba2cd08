"""Markdown view of a profile document: a pure, deterministic function of the data."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from aitune.analysis.statistics import summarize
from aitune.report.communication import COMMUNICATION_HEADERS, communication_summary
from aitune.report.document import (
    LITE_LACKS,
    calls_note,
    is_lite,
    operator_runs_note,
    scenario_names,
    select_scenario,
)
from aitune.report.efficiency import has_work
from aitune.report.formatting import MISSING, factor, ms, percent
from aitune.report.headline import headline_rows
from aitune.report.key_averages import OPERATOR_HEADER, operator_tables
from aitune.report.memo import computed_once
from aitune.report.memory import memory_note
from aitune.report.model import (
    UNSET,
    Distributed,
    Environment,
    Profile,
    ProfileLike,
    Run,
    Statistics,
    Summary,
    TreeNode,
    UnsetType,
    as_profile,
    given,
    json_form,
    self_time_in,
    time_in,
)
from aitune.report.phases import split_line, tokens_line
from aitune.report.ranks import rank_rows, regions_across_ranks
from aitune.report.safe_text import markdown_text
from aitune.report.samples import has_device_time, median_run, residual_causes
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


class Markup(str):
    """A cell this renderer wrote in Markdown on purpose (``_(residual)_``); every other cell is escaped."""


@computed_once()  # every section reads the same headline rows, and each view converts to its record once
def render_markdown(doc: ProfileLike) -> str:
    """Render every section of ``doc``, summaries first; the same document always gives the same text.

    A multi-scenario document gets the overview once, then every section per scenario.
    """
    record = as_profile(doc)
    sections = [_overview(record)]
    names = scenario_names(record)
    for name in names or [None]:
        scenario = as_profile(select_scenario(record, name))
        if name is not None:
            sections.append(f"## Scenario: {markdown_text(name)}")
        sections += [
            _summary(scenario),
            _phases(scenario),
            _ranks(scenario),
            _residual_causes(scenario),
            _communication(scenario),
            _memory(scenario),
            _tree(scenario),
            _runs(scenario),
            _regions(scenario),
            _attribution(scenario),
            _efficiency(scenario),
            _key_averages(scenario),
            _warnings(scenario),
        ]
    sections.append(_environment(record))
    return "\n\n".join(section for section in sections if section) + "\n"


def table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A Markdown table; every cell but a `Markup` one, headers too (a phase's name is one), is escaped
    (`markdown_text`), so names cannot break it."""
    lines = ["| " + " | ".join(_cell(cell) for cell in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(cell: Any) -> str:
    return cell if isinstance(cell, Markup) else markdown_text(cell)


def _overview(record: Profile) -> str:
    config, inputs = record.config, record.input
    kwargs = markdown_text(", ".join(map(str, given(inputs.kwargs, []))) or MISSING)
    activities = ", ".join(given(record.profiler.activities, []))
    lines = [
        "# aitune performance profile",
        "",
        "## Overview",
        "",
        f"- Created: {markdown_text(record.created_at or MISSING)}",
        f"- aitune version: {markdown_text(record.aitune_version or MISSING)}",
        f"- Target: {markdown_text(given(record.target.type, MISSING))}",
        f"- Warmup runs: {given(config.warmup_runs, MISSING)}; measured runs: {given(config.measured_runs, MISSING)}",
        f"- Input: {given(inputs.args_count, MISSING)} positional argument(s); keyword arguments: {kwargs}",
        f"- Profiler activities: {markdown_text(activities or MISSING)}",
    ]
    if is_lite(record):
        lines.append(f"- Lite capture: {LITE_LACKS}")
    if note := operator_runs_note(record):
        lines.append(f"- Operator runs: {note}")
    if trace_file := given(record.trace_file, ""):
        lines.append(f"- Chrome trace: {markdown_text(trace_file)}")
    overhead = record.capture_overhead
    if overhead is not UNSET:
        ratio = factor(overhead.ratio, given(overhead.ratio_low, None), given(overhead.ratio_high, None))
        lines.append(
            f"- Capture overhead: median run {ms(overhead.captured_wall_time_us)} ms under capture vs "
            f"{ms(overhead.plain_wall_time_us)} ms in warm uninstrumented warmups ({ratio}, 95% interval)"
        )
    warmup = record.warmup
    if warmup is not UNSET:
        steady = "steady" if warmup.steady else "not yet steady: the overhead and first runs are uncertain"
        lines.append(f"- Warmups: {warmup.performed} performed ({warmup.requested} requested), {steady}")
        lines.append(f"- Calls: {calls_note(record)}")
    if scenario_names(record):
        lines.append(f"- Scenarios: {markdown_text(', '.join(scenario_names(record)))}")
    if record.distributed is not UNSET:
        lines.append(_distributed_line(record.distributed, record.runs))
    return "\n".join(lines)


def _distributed_line(distributed: Distributed, runs: Sequence[Run]) -> str:
    """Which rank of which job this is, and how long it waited for the others before its runs."""
    known = (
        ("backend", distributed.backend),
        ("local rank", distributed.local_rank),
        ("host index", distributed.host_index),
    )
    details = [f"{label} {markdown_text(str(value))}" for label, value in known if value is not UNSET]
    waits = [run.barrier_wait_us for run in runs if run.barrier_wait_us is not UNSET]
    wait = f"; median barrier wait before a run {ms(statistics.median(waits))} ms" if waits else ""
    return (
        f"- Distributed: rank {markdown_text(str(distributed.rank))} of "
        f"{markdown_text(str(distributed.world_size))} ({', '.join(details) or MISSING}){wait}"
    )


def _summary(record: Profile) -> str:
    run_statistics = record.statistics
    if _left_out(run_statistics):
        return ""
    header = ["", "Median", "p10", "p90", "CV"]
    rows = [
        (f"Run {name.removesuffix('_us').replace('_', ' ')} (ms)", *_spread(summary, ms))
        for name, summary in given(run_statistics.runs, {}).items()
    ]
    parts = ["## Summary", f"Over {len(record.runs)} measured run(s).", table(header, rows)]
    # The headline's rows: the level where the run's time splits, a spanning region's self time named.
    # Their spread as the model's Summary, read like the document's own summaries above.
    region_rows = [
        (_label(row.label, row.role), *_spread(msgspec.convert(summarize(row.fractions), Summary), percent))
        for domain in time_domains(record)
        for row in headline_rows(record, domain)
        if domain == "cpu" or row.role != "residual"
    ]
    if region_rows:
        parts.append(table(["Region (CPU share, then device share)", "Median", "p10", "p90", "CV"], region_rows))
    return "\n\n".join(parts)


def _left_out(part: Statistics | Environment | UnsetType) -> bool:
    """Whether the document leaves ``part`` out or holds it empty (``{}``): either way, no section."""
    return part is UNSET or part == type(part)()


def _phases(record: Profile) -> str:
    """A generate-like document's phases: how they were found, the token figures, each phase's time,
    and each region's share of every phase (medians over the runs)."""
    figures = phase_table(record)
    if not figures:
        return ""
    phases, shares = phase_share_table(record, _emphasis)
    parts = [
        "## Phases",
        markdown_text(split_line(record) or ""),
        markdown_text(tokens_line(record) or ""),
        table(PHASE_HEADER, figures),
        table([PHASE_SHARE_TITLE, *phases], shares),
        PHASE_RESIDUAL_NOTE,
    ]
    return "\n\n".join(parts)


def _emphasis(label: str) -> Markup:
    return Markup(f"_{markdown_text(label)}_")


def time_domains(doc: ProfileLike) -> list[str]:
    """``cpu``, and ``device`` when the runs have device time (`has_device_time`)."""
    return ["cpu"] + (["device"] if has_device_time(doc) else [])


def _label(label: str, role: str) -> str:
    return Markup("_(residual)_") if role == "residual" else label


def _spread(summary: Summary, show: Any) -> tuple[str, str, str, str]:
    return show(summary.median), show(summary.p10), show(summary.p90), percent(summary.cv)


def _ranks(record: Profile) -> str:
    """A merged document's ranks: each rank's step times, then each region's median per rank."""
    ranks = record.ranks
    if ranks is UNSET:  # not merged
        return ""
    rank_table = table(
        ["Rank", "Median (ms)", "Min (ms)", "Max (ms)", "Barrier wait (ms)", "Slowest in (steps)", "Straggler in"],
        [
            (
                row.rank,
                ms(row.median_us),
                ms(row.min_us),
                ms(row.max_us),
                ms(row.barrier_wait_us),
                row.slowest_steps,
                row.straggler_region or MISSING,
            )
            for row in rank_rows(record)
        ],
    )
    region_table = table(
        ["Region", "Slowest rank", "Imbalance", *(f"Rank {rank} (ms)" for rank in range(ranks.world_size))],
        [
            (
                row.region_id,
                row.slowest_rank,
                factor(row.imbalance),
                *map(ms, row.medians_us),
            )
            for row in regions_across_ranks(record)
        ],
    )
    intro = (
        f"Merged from {ranks.world_size} ranks ({markdown_text(given(ranks.backend, '') or MISSING)}): each run is "
        f"the run of the rank slowest in that step; critical rank {ranks.critical_rank}. Medians over runs of "
        f"{ranks.domain} time; imbalance is max ÷ median across ranks."
    )
    return f"## Ranks\n\n{intro}\n\n{rank_table}\n\n### Regions across ranks\n\n{region_table}"


def _residual_causes(record: Profile) -> str:
    causes = residual_causes(record)
    if not causes:
        return ""
    runs = [run for run in record.traced_runs() if run.residual.causes is not UNSET]
    rows = [(cause, ms(summary.time_us), percent(summary.share)) for cause, summary in causes.items()]
    spanning = markdown_text(", ".join(given(record.spanning_regions, [])))
    scope = f" listed per run (the self time of {spanning} included)" if spanning else ""
    if record.operator_runs is UNSET:
        lead = "Median over runs of the CPU time"
    else:
        lead = (
            "The operator run's CPU time"
            if len(runs) == 1
            else f"Median over the {len(runs)} operator runs of the CPU time"
        )
    return f"## Residual by cause\n\n{lead} outside every region{scope}.\n\n" + table(
        ["Cause", "CPU (ms)", "Share of run"], rows
    )


def _communication(record: Profile) -> str:
    """Median per run of each region's communication, the residual's and the run's; only when the trace had any."""
    summary = communication_summary(record)
    if summary is None:
        return ""
    keys = summary.keys
    shown = {"cpu_time_us": ms, "device_time_us": ms, "bytes": lambda value: f"{value:,.0f}"}
    rows = [
        (row.label if row.role == "region" else Markup(f"_{row.label}_"), *(shown[k](row.medians[k]) for k in keys))
        for row in summary.rows
    ]
    header = ["Region", *(COMMUNICATION_HEADERS[key] for key in keys)]
    text = (
        "## Communication\n\nMedian over runs of the time with a collective or point-to-point operation in flight "
        "(CPU: on any thread; device: NCCL kernels) and the bytes of those that started there.\n\n"
        + table(header, rows)
    )
    if summary.device_overlap_us is not None:
        text += (
            f"\n\nNCCL kernels ran beside compute kernels for {ms(summary.device_overlap_us)} ms a run "
            f"({percent(summary.device_overlap_fraction)} of their time)."
        )
    return text


def _memory(record: Profile) -> str:
    """Bytes allocated, freed and peak live per region and device; a lite document's overview says it has none."""
    if is_lite(record):
        return ""
    rows, hidden = memory_table(record, _emphasis)
    if not rows:
        return f"## Memory\n\n{markdown_text(memory_note(record) or '')}"
    more = f"\n\n… {hidden} more region row(s) with lower peaks." if hidden else ""
    return f"## Memory\n\n{markdown_text(memory_lead(record))}\n\n" + table(MEMORY_HEADER, rows) + more


def _tree(record: Profile) -> str:
    runs = [run for run in record.runs if given(run.tree, [])]
    if not runs:
        return ""
    run = median_run(runs)
    rows: list[Sequence[Any]] = []
    stack: list[tuple[TreeNode, int]] = [(node, 0) for node in reversed(given(run.tree, []))]
    while stack:
        node, depth = stack.pop()
        rows.append(
            (
                f"{'· ' * depth}{node.region_id}",
                node.calls,
                ms(node.cpu_time_us),
                ms(node.cpu_self_time_us),
                percent(node.cpu_time_fraction),
                ms(time_in(node, "device")),
                ms(self_time_in(node, "device")),
            )
        )
        stack += [(child, depth + 1) for child in reversed(node.children)]
    header = [
        "Region",
        "Calls",
        "CPU total (ms)",
        "CPU self (ms)",
        "CPU share",
        "Device total (ms)",
        "Device self (ms)",
    ]
    return f"## Region tree (run {run.run_index}, the median run)\n\n" + table(header, rows)


def _runs(record: Profile) -> str:
    rows = [
        (
            run.run_index,
            ms(given(run.timing.wall_time_us, None)),
            ms(run.timing.cpu_time_us),
            ms(time_in(run.timing, "device")),
        )
        for run in record.runs
    ]
    return "## Runs (per run)\n\n" + table(["Run", "Wall (ms)", "CPU (ms)", "Device (ms)"], rows)


def _regions(record: Profile) -> str:
    if not record.regions:
        return "## Regions\n\nNo region was observed."
    rows = [
        (region.name, region.kind, given(region.wrapper_state, MISSING), given(region.module_type, MISSING))
        for region in record.regions
    ]
    return "## Regions\n\n" + table(["Region", "Kind", "State", "Module type"], rows)


def _attribution(record: Profile) -> str:
    """Each run's headline rows: its regions, the spanning regions' self time, and its residual."""
    cpu_rows = headline_rows(record, "cpu")
    device_rows = headline_rows(record, "device") if has_device_time(record) else [None] * len(cpu_rows)
    rows: list[Sequence[Any]] = [
        (
            run.run_index,
            _label(row.label, row.role),
            MISSING if row.role == "residual" else row.calls[index],
            ms(row.times_us[index]),
            percent(row.fractions[index]),
            ms(on_device.times_us[index]) if on_device else MISSING,
            percent(on_device.fractions[index]) if on_device else MISSING,
        )
        for index, run in enumerate(record.runs)
        for row, on_device in zip(cpu_rows, device_rows, strict=True)
        if row.role != "region" or row.calls[index] > 0  # a region the run did not enter gets no row
    ]
    header = ["Run", "Region", "Calls", "CPU (ms)", "CPU share", "Device (ms)", "Device share"]
    return "## Per-Run Attribution\n\n" + table(header, rows)


def _key_averages(record: Profile) -> str:
    parts = [
        f"### Top operators {title}\n\n" + table(list(OPERATOR_HEADER), rows) for title, rows in operator_tables(record)
    ]
    return "## Profiler Key Averages\n\n" + "\n\n".join(parts) if parts else ""


def _efficiency(record: Profile) -> str:
    """Each region's work, achieved rate and place under the machine's roofs (`aitune.report.efficiency`)."""
    if is_lite(record):
        return ""
    if not has_work(record):
        return f"## Work and Efficiency\n\n{NO_WORK}"
    lines = "\n".join(markdown_text(line) for line in roof_lines(record))
    notes = "\n".join(f"- {markdown_text(region)}: {markdown_text(note)}" for region, note in uncounted_notes(record))
    body = "\n\n".join([lines, table(EFFICIENCY_HEADER, efficiency_table(record)), notes])
    return "## Work and Efficiency\n\n" + body.rstrip()


def _warnings(record: Profile) -> str:
    if not record.warnings:
        return "## Warnings\n\nNone."
    rows = [(warning.code, warning.source, warning.message) for warning in record.warnings]
    return "## Warnings\n\n" + table(["Code", "Source", "Message"], rows)


def _environment(record: Profile) -> str:
    """Every figure of the environment the document holds, but the machine peaks (in Work and Efficiency)."""
    environment = record.environment
    if _left_out(environment):
        return ""
    shown = msgspec.structs.asdict(msgspec.structs.replace(environment, machine_peaks=UNSET))
    rows = [(key, _flat(value)) for key, value in shown.items() if value is not UNSET]
    return "## Environment\n\n" + table(["Key", "Value"], rows)


def _flat(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value)) or MISSING
    if isinstance(value, msgspec.Struct):  # the gain calibration: shown as the document's object
        return str(json_form(value))
    return str(value)
