"""Markdown view of a profile document: a pure, deterministic function of the data."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from aitune.analysis.statistics import summarize
from aitune.report.communication import COMMUNICATION_HEADERS, communication_summary
from aitune.report.document import (
    LITE_LACKS,
    ProfileDoc,
    calls_note,
    is_lite,
    operator_runs,
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
from aitune.report.phases import split_line, tokens_line
from aitune.report.ranks import is_merged, rank_rows, regions_across_ranks
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


@computed_once()  # every section reads the same headline rows
def render_markdown(doc: ProfileDoc) -> str:
    """Render every section of ``doc``, summaries first; the same document always gives the same text.

    A multi-scenario document gets the overview once, then every section per scenario.
    """
    sections = [_overview(doc)]
    names = scenario_names(doc)
    for name in names or [None]:
        view = select_scenario(doc, name)
        if name is not None:
            sections.append(f"## Scenario: {markdown_text(name)}")
        sections += [
            _summary(view),
            _phases(view),
            _ranks(view),
            _residual_causes(view),
            _communication(view),
            _memory(view),
            _tree(view),
            _runs(view),
            _regions(view),
            _attribution(view),
            _efficiency(view),
            _key_averages(view),
            _warnings(view),
        ]
    sections.append(_environment(doc))
    return "\n\n".join(section for section in sections if section) + "\n"


def table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A Markdown table; every cell but a `Markup` one, headers too (a phase's name is one), is escaped
    (`markdown_text`), so names cannot break it."""
    lines = ["| " + " | ".join(_cell(cell) for cell in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(cell: Any) -> str:
    return cell if isinstance(cell, Markup) else markdown_text(cell)


def _overview(doc: ProfileDoc) -> str:
    config, inputs = doc.get("config", {}), doc.get("input", {})
    kwargs = markdown_text(", ".join(map(str, inputs.get("kwargs", []))) or MISSING)
    lines = [
        "# aitune performance profile",
        "",
        "## Overview",
        "",
        f"- Created: {markdown_text(doc.get('created_at') or MISSING)}",
        f"- aitune version: {markdown_text(doc.get('aitune_version') or MISSING)}",
        f"- Target: {markdown_text(doc.get('target', {}).get('type', MISSING))}",
        f"- Warmup runs: {config.get('warmup_runs', MISSING)}; measured runs: {config.get('measured_runs', MISSING)}",
        f"- Input: {inputs.get('args_count', MISSING)} positional argument(s); keyword arguments: {kwargs}",
        f"- Profiler activities: {markdown_text(', '.join(doc.get('profiler', {}).get('activities', [])) or MISSING)}",
    ]
    if is_lite(doc):
        lines.append(f"- Lite capture: {LITE_LACKS}")
    if note := operator_runs_note(doc):
        lines.append(f"- Operator runs: {note}")
    if doc.get("trace_file"):
        lines.append(f"- Chrome trace: {markdown_text(doc['trace_file'])}")
    overhead = doc.get("capture_overhead")
    if overhead:
        ratio = factor(overhead["ratio"], overhead.get("ratio_low"), overhead.get("ratio_high"))
        lines.append(
            f"- Capture overhead: median run {ms(overhead['captured_wall_time_us'])} ms under capture vs "
            f"{ms(overhead['plain_wall_time_us'])} ms in warm uninstrumented warmups ({ratio}, 95% interval)"
        )
    warmup = doc.get("warmup")
    if warmup:
        steady = "steady" if warmup["steady"] else "not yet steady: the overhead and first runs are uncertain"
        lines.append(f"- Warmups: {warmup['performed']} performed ({warmup['requested']} requested), {steady}")
        lines.append(f"- Calls: {calls_note(doc)}")
    if scenario_names(doc):
        lines.append(f"- Scenarios: {markdown_text(', '.join(scenario_names(doc)))}")
    distributed = doc.get("distributed")
    if distributed:
        lines.append(_distributed_line(distributed, doc.get("runs", [])))
    return "\n".join(lines)


def _distributed_line(distributed: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> str:
    """Which rank of which job this is, and how long it waited for the others before its runs."""
    details = [
        f"{key.replace('_', ' ')} {markdown_text(str(distributed[key]))}"
        for key in ("backend", "local_rank", "host_index")
        if key in distributed
    ]
    waits = [run["barrier_wait_us"] for run in runs if "barrier_wait_us" in run]
    wait = f"; median barrier wait before a run {ms(summarize(waits)['median'])} ms" if waits else ""
    return (
        f"- Distributed: rank {markdown_text(str(distributed.get('rank', MISSING)))} of "
        f"{markdown_text(str(distributed.get('world_size', MISSING)))} ({', '.join(details) or MISSING}){wait}"
    )


def _summary(doc: ProfileDoc) -> str:
    stats = doc.get("statistics")
    if not stats:
        return ""
    header = ["", "Median", "p10", "p90", "CV"]
    rows = [
        (f"Run {name.removesuffix('_us').replace('_', ' ')} (ms)", *_spread(summary, ms))
        for name, summary in stats.get("runs", {}).items()
    ]
    parts = ["## Summary", f"Over {len(doc['runs'])} measured run(s).", table(header, rows)]
    # The headline's rows: the level where the run's time splits, a spanning region's self time named.
    region_rows = [
        (_label(row.label, row.role), *_spread(summarize(row.fractions), percent))
        for domain in time_domains(doc)
        for row in headline_rows(doc, domain)
        if domain == "cpu" or row.role != "residual"
    ]
    if region_rows:
        parts.append(table(["Region (CPU share, then device share)", "Median", "p10", "p90", "CV"], region_rows))
    return "\n\n".join(parts)


def _phases(doc: ProfileDoc) -> str:
    """A generate-like document's phases: how they were found, the token figures, each phase's time,
    and each region's share of every phase (medians over the runs)."""
    figures = phase_table(doc)
    if not figures:
        return ""
    phases, shares = phase_share_table(doc, _emphasis)
    parts = [
        "## Phases",
        markdown_text(split_line(doc) or ""),
        markdown_text(tokens_line(doc) or ""),
        table(PHASE_HEADER, figures),
        table([PHASE_SHARE_TITLE, *phases], shares),
        PHASE_RESIDUAL_NOTE,
    ]
    return "\n\n".join(parts)


def _emphasis(label: str) -> Markup:
    return Markup(f"_{markdown_text(label)}_")


def time_domains(doc: ProfileDoc) -> list[str]:
    """``cpu``, and ``device`` when the runs have device time (`has_device_time`)."""
    return ["cpu"] + (["device"] if has_device_time(doc) else [])


def _label(label: str, role: str) -> str:
    return Markup("_(residual)_") if role == "residual" else label


def _spread(summary: Mapping[str, float], show: Any) -> tuple[str, str, str, str]:
    return show(summary["median"]), show(summary["p10"]), show(summary["p90"]), percent(summary["cv"])


def _ranks(doc: ProfileDoc) -> str:
    """A merged document's ranks: each rank's step times, then each region's median per rank."""
    if not is_merged(doc):
        return ""
    ranks = doc["ranks"]
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
            for row in rank_rows(doc)
        ],
    )
    region_table = table(
        ["Region", "Slowest rank", "Imbalance", *(f"Rank {rank} (ms)" for rank in range(ranks["world_size"]))],
        [
            (
                row.region_id,
                row.slowest_rank,
                factor(row.imbalance),
                *map(ms, row.medians_us),
            )
            for row in regions_across_ranks(doc)
        ],
    )
    intro = (
        f"Merged from {ranks['world_size']} ranks ({markdown_text(ranks.get('backend') or MISSING)}): each run is the "
        f"run of the rank slowest in that step; critical rank {ranks['critical_rank']}. Medians over runs of "
        f"{ranks['domain']} time; imbalance is max ÷ median across ranks."
    )
    return f"## Ranks\n\n{intro}\n\n{rank_table}\n\n### Regions across ranks\n\n{region_table}"


def _residual_causes(doc: ProfileDoc) -> str:
    causes = residual_causes(doc)
    if not causes:
        return ""
    runs = [run for run in operator_runs(doc) if "causes" in run["residual"]]
    rows = [(cause, ms(summary.time_us), percent(summary.share)) for cause, summary in causes.items()]
    spanning = markdown_text(", ".join(doc.get("spanning_regions", [])))
    scope = f" listed per run (the self time of {spanning} included)" if spanning else ""
    over = f"the {len(runs)} operator runs" if doc.get("operator_runs") else "runs"
    return f"## Residual by cause\n\nMedian over {over} of the CPU time outside every region{scope}.\n\n" + table(
        ["Cause", "CPU (ms)", "Share of run"], rows
    )


def _communication(doc: ProfileDoc) -> str:
    """Median per run of each region's communication, the residual's and the run's; only when the trace had any."""
    summary = communication_summary(doc)
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


def _memory(doc: ProfileDoc) -> str:
    """Bytes allocated, freed and peak live per region and device; a lite document's overview says it has none."""
    if is_lite(doc):
        return ""
    rows, hidden = memory_table(doc, _emphasis)
    if not rows:
        return f"## Memory\n\n{markdown_text(memory_note(doc) or '')}"
    more = f"\n\n… {hidden} more region row(s) with lower peaks." if hidden else ""
    return f"## Memory\n\n{markdown_text(memory_lead(doc))}\n\n" + table(MEMORY_HEADER, rows) + more


def _tree(doc: ProfileDoc) -> str:
    runs = [run for run in doc["runs"] if run.get("tree")]
    if not runs:
        return ""
    run = median_run(runs)
    rows: list[Sequence[Any]] = []
    stack = [(node, 0) for node in reversed(run["tree"])]
    while stack:
        node, depth = stack.pop()
        rows.append(
            (
                f"{'· ' * depth}{node['region_id']}",
                node["calls"],
                ms(node["cpu_time_us"]),
                ms(node["cpu_self_time_us"]),
                percent(node["cpu_time_fraction"]),
                ms(node.get("device_time_us")),
                ms(node.get("device_self_time_us")),
            )
        )
        stack += [(child, depth + 1) for child in reversed(node["children"])]
    header = [
        "Region",
        "Calls",
        "CPU total (ms)",
        "CPU self (ms)",
        "CPU share",
        "Device total (ms)",
        "Device self (ms)",
    ]
    return f"## Region tree (run {run['run_index']}, the median run)\n\n" + table(header, rows)


def _runs(doc: ProfileDoc) -> str:
    rows = [
        (
            run["run_index"],
            ms(run["timing"].get("wall_time_us")),
            ms(run["timing"].get("cpu_time_us")),
            ms(run["timing"].get("device_time_us")),
        )
        for run in doc["runs"]
    ]
    return "## Runs (per run)\n\n" + table(["Run", "Wall (ms)", "CPU (ms)", "Device (ms)"], rows)


def _regions(doc: ProfileDoc) -> str:
    if not doc["regions"]:
        return "## Regions\n\nNo region was observed."
    rows = [
        (region["name"], region["kind"], region.get("wrapper_state", MISSING), region.get("module_type", MISSING))
        for region in doc["regions"]
    ]
    return "## Regions\n\n" + table(["Region", "Kind", "State", "Module type"], rows)


def _attribution(doc: ProfileDoc) -> str:
    """Each run's headline rows: its regions, the spanning regions' self time, and its residual."""
    device = "device" in time_domains(doc)
    cpu_rows = headline_rows(doc, "cpu")
    device_rows = headline_rows(doc, "device") if device else [None] * len(cpu_rows)
    rows: list[Sequence[Any]] = [
        (
            run["run_index"],
            _label(row.label, row.role),
            MISSING if row.role == "residual" else row.calls[index],
            ms(row.times_us[index]),
            percent(row.fractions[index]),
            ms(on_device.times_us[index]) if on_device else MISSING,
            percent(on_device.fractions[index]) if on_device else MISSING,
        )
        for index, run in enumerate(doc["runs"])
        for row, on_device in zip(cpu_rows, device_rows, strict=True)
        if row.role != "region" or row.calls[index] > 0  # a region the run did not enter gets no row
    ]
    header = ["Run", "Region", "Calls", "CPU (ms)", "CPU share", "Device (ms)", "Device share"]
    return "## Per-Run Attribution\n\n" + table(header, rows)


def _key_averages(doc: ProfileDoc) -> str:
    parts = [
        f"### Top operators {title}\n\n" + table(list(OPERATOR_HEADER), rows) for title, rows in operator_tables(doc)
    ]
    return "## Profiler Key Averages\n\n" + "\n\n".join(parts) if parts else ""


def _efficiency(doc: ProfileDoc) -> str:
    """Each region's work, achieved rate and place under the machine's roofs (`aitune.report.efficiency`)."""
    if is_lite(doc):
        return ""
    if not has_work(doc):
        return f"## Work and Efficiency\n\n{NO_WORK}"
    lines = "\n".join(markdown_text(line) for line in roof_lines(doc))
    notes = "\n".join(f"- {markdown_text(region)}: {markdown_text(note)}" for region, note in uncounted_notes(doc))
    body = "\n\n".join([lines, table(EFFICIENCY_HEADER, efficiency_table(doc)), notes])
    return "## Work and Efficiency\n\n" + body.rstrip()


def _warnings(doc: ProfileDoc) -> str:
    if not doc["warnings"]:
        return "## Warnings\n\nNone."
    rows = [(w["code"], w["source"], w["message"]) for w in doc["warnings"]]
    return "## Warnings\n\n" + table(["Code", "Source", "Message"], rows)


def _environment(doc: ProfileDoc) -> str:
    environment = doc.get("environment")
    if not environment:
        return ""
    rows = [(key, _flat(value)) for key, value in environment.items() if key != "machine_peaks"]  # in Work
    return "## Environment\n\n" + table(["Key", "Value"], rows)


def _flat(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value)) or MISSING
    return MISSING if value is None else str(value)
