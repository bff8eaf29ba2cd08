"""What no type can say about a profile: run on the typed record (`aitune.report.model`) once it decoded.

Fractions that add up (regions and residual, tree nodes, communication, phases), a spanning chain at the top
of each tree, phases consistent with the split and the token figures, a device time beside its fraction,
and the times readers divide by resolved. Each problem is one line that starts with its JSON path; the
everyday (valid) document builds no path at all.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from msgspec import UNSET

from aitune.report.model import Profile, Run, Section, TreeNode
from aitune.report.problems import json_path, shortened

ADDS_UP_TOLERANCE = 1e-3
"""Σ region fractions + residual fraction may differ from 1 by this much (AITune rounds its own)."""

TREE_TOLERANCE_US = 0.01
"""A child may seem to outlast its parent by a few ns of timestamp rounding, clamping the self time at 0."""

TIME_RESOLUTION_US = 0.0005
"""Half the trace's 1 ns clock: a time a reader divides by (a run's, a phase's, counted operators') is a
sum or a difference of clock readings, so it is 0 or at least this; a smaller one would make a rate of
10³⁰⁰ per second."""

MAX_TREE_DEPTH = 120
"""Most levels a run's region tree may nest: each adds two levels of JSON, so a profile stays within the
JSON reader's depth limit (`aitune.report.io.MAX_JSON_DEPTH`) and every tree walk far below Python's
recursion limit. Captures nest modules a few dozen levels at most."""


def profile_problems(profile: Profile) -> list[str]:
    """Every invariant ``profile`` breaks, the top level's first, then each scenario's; [] when it holds."""
    sections: list[tuple[str, Section]] = [("", profile)]
    sections += [(f"scenarios[{i}].", scenario) for i, scenario in enumerate(profile.scenarios or ())]
    return [f"{prefix}{problem}" for prefix, section in sections for problem in section_problems(section)]


def section_problems(section: Section) -> list[str]:
    """What no type can say about one section (the top level, or one of its scenarios)."""
    if not section.runs:  # every reader takes a median run: a capture measures at least one
        return ["runs: no measured run; capture the profile again"]
    spanning = section.spanning_regions or []
    problems = []
    for key, runs in (("runs", section.runs), ("operator_runs", section.operator_runs or ())):
        for index, run in enumerate(runs):
            where = f"{key}[{index}]"
            problems += (
                check_adds_up(run, where)
                + check_tree_adds_up(run, where)
                + check_communication_adds_up(run, where)
                + check_split_level(run, spanning, where)
                + check_phases_add_up(run, where)
                + check_times_resolved(run, where)
                + check_device_pairs(run, where)
            )
    problems += check_phase_split(section) + check_statistics_regions(section)
    for index, run in enumerate(section.runs):
        if run.phases is not UNSET and run.generation is not UNSET:
            problems += check_generation(run, f"runs[{index}]")
    return problems


def check_adds_up(run: Run, where: str = "runs[0]") -> list[str]:
    """Per time domain present: Σ topmost-region fractions + residual fraction = 1 (within tolerance)."""
    problems = []
    residual, timing = run.residual, run.timing
    total = residual.cpu_time_fraction + sum([region.cpu_time_fraction for region in run.regions])
    if timing.cpu_time_us > 0 and abs(total - 1.0) > ADDS_UP_TOLERANCE:
        problems.append(f"{where}: cpu region fractions plus residual add up to {total:.4f}, not 1")
    if residual.device_time_fraction is not UNSET:
        total = residual.device_time_fraction + sum(
            [region.device_time_fraction or 0.0 for region in run.regions]  # UNSET is falsy
        )
        if (timing.device_time_us or 0) > 0 and abs(total - 1.0) > ADDS_UP_TOLERANCE:
            problems.append(f"{where}: device region fractions plus residual add up to {total:.4f}, not 1")
    return problems


def check_tree_adds_up(run: Run, where: str = "runs[0]") -> list[str]:
    """In a run's region tree, every node's children totals + its self time = its total, per domain; and
    the tree nests at most `MAX_TREE_DEPTH` levels."""
    roots = run.tree or []
    gaps, depth = _tree_gaps(roots)
    if depth > MAX_TREE_DEPTH:
        return [
            f"{where}.tree: regions nested more than {MAX_TREE_DEPTH} levels deep; no capture nests that deep, "
            "so the file was not written by one"
        ]
    if not gaps:  # the everyday case: no node's path is spelled out
        return []
    paths = _tree_paths(roots, where)
    return [
        f"{paths[index]}: {domain} children plus self time is {parts:.3f} µs, not the total {total:.3f} µs"
        for index, domain, parts, total in gaps
    ]


def _tree_gaps(roots: Sequence[TreeNode]) -> tuple[list[tuple[int, str, float, float]], int]:
    """Where a tree node's children totals + its self time miss its total (the node's index, level by level,
    as `_tree_paths` counts; domain; those; total), and how many levels the tree has."""
    gaps: list[tuple[int, str, float, float]] = []
    level, depth, index = list(roots), 0, 0
    while level and depth <= MAX_TREE_DEPTH:
        depth += 1
        below: list[TreeNode] = []
        for node in level:
            children = node.children
            parts = node.cpu_self_time_us
            if children:
                below += children
                parts += sum([child.cpu_time_us for child in children])
            if abs(parts - node.cpu_time_us) > TREE_TOLERANCE_US + 1e-9 * node.cpu_time_us:
                gaps.append((index, "cpu", parts, node.cpu_time_us))
            if node.device_self_time_us is not UNSET:
                parts = node.device_self_time_us + sum([child.device_time_us or 0.0 for child in children])
                total = node.device_time_us or 0.0
                if abs(parts - total) > TREE_TOLERANCE_US + 1e-9 * total:
                    gaps.append((index, "device", parts, total))
            index += 1
        level = below
    return gaps, depth + (1 if level else 0)


def _tree_paths(roots: Sequence[TreeNode], where: str) -> list[str]:
    """The JSON path of every node of a region tree, level by level, in the order of `_tree_gaps`."""
    paths, level = [], [(f"{where}.tree[{i}]", node) for i, node in enumerate(roots)]
    while level:
        paths += [path for path, _ in level]
        level = [(f"{path}.children[{i}]", child) for path, node in level for i, child in enumerate(node.children)]
    return paths


_COMMUNICATION_KEYS = ("cpu_time_us", "device_time_us", "bytes")


def check_communication_adds_up(run: Run, where: str = "runs[0]") -> list[str]:
    """Per figure of a run's ``communication``: its regions' + its residual's = the run's."""
    total = run.communication
    if total is UNSET:
        return []
    parts = [region.communication for region in run.regions] + [run.residual.communication]
    problems = []
    for key in _COMMUNICATION_KEYS:
        whole = getattr(total, key)
        if whole is UNSET:
            continue
        added = sum(getattr(part, key) or 0 for part in parts if part is not UNSET)
        if abs(added - whole) > TREE_TOLERANCE_US + 1e-9 * whole:
            problems.append(f"{where}.communication.{key}: regions plus residual is {added:.3f}, not {whole:.3f}")
    return problems


def check_split_level(run: Run, spanning: Sequence[str], where: str = "runs[0]") -> list[str]:
    """With ``spanning_regions``, the run's tree starts with that chain and its ``regions`` are the last one's children.

    That is what keeps the headline adding up: the regions, the spanning regions' self times and
    the time outside them together are the run.
    """
    level = run.tree or []
    for region in spanning:
        found = [node.region_id for node in level]
        if found != [region]:
            return [f"{where}.tree: the spanning region {region} is not alone at its level (found {found})"]
        level = level[0].children
    if spanning and sorted(node.region_id for node in level) != sorted(r.region_id for r in run.regions):
        return [f"{where}.regions: not the children of the spanning region {spanning[-1]} in the run's tree"]
    return []


def check_phases_add_up(run: Run, where: str = "runs[0]") -> list[str]:
    """A generate-like run's phases tile it (their times add up to the run's CPU time, each fraction is its
    time over the run's, so the fractions add up to 1), and within each phase its region fractions plus its
    residual fraction add up to 1."""
    phases = run.phases
    if not phases:
        return []
    problems = []
    total, run_us = sum(phase.cpu_time_us for phase in phases), run.timing.cpu_time_us
    if abs(total - run_us) > TREE_TOLERANCE_US + ADDS_UP_TOLERANCE * run_us:
        problems.append(f"{where}.phases: the phases add up to {total:.3f} µs, not the run's {run_us:.3f} µs")
    for index, phase in enumerate(phases):
        share = phase.cpu_time_us / run_us if run_us > 0 else 0.0
        if abs(phase.cpu_time_fraction - share) > ADDS_UP_TOLERANCE:
            problems.append(
                f"{where}.phases[{index}].cpu_time_fraction: {phase.cpu_time_fraction:.4f}, but the phase is "
                f"{share:.4f} of the run"
            )
        shares = phase.residual.cpu_time_fraction + sum(r.cpu_time_fraction for r in phase.regions)
        if phase.cpu_time_us > 0 and abs(shares - 1.0) > ADDS_UP_TOLERANCE:
            problems.append(f"{where}.phases[{index}]: region fractions plus residual add up to {shares:.4f}, not 1")
    return problems


def check_phase_split(section: Section) -> list[str]:
    """``phase_split`` and the runs' ``phases`` come together: with it, every run has its phases (in the split's
    order, each named in it) and its ``generation``, and every phase it names is some run's; without it, no
    run has either. Readers index a phase's rows on that promise."""
    split = section.phase_split
    if split is UNSET:
        return [
            f"runs[{index}].{key}: present, but the document has no phase_split; drop it or add the split"
            for index, run in enumerate(section.runs)
            for key in ("phases", "generation")
            if getattr(run, key) is not UNSET
        ]
    names, found = split.phases, set()
    problems = []
    for index, run in enumerate(section.runs):
        missing = [key for key in ("phases", "generation") if not getattr(run, key)]
        if missing:
            problems.append(f"runs[{index}]: no {' and no '.join(missing)}, but the document has a phase_split")
            continue
        order = [phase.name for phase in run.phases or ()]
        found.update(order)
        if order != [name for name in names if name in order] or len(set(order)) != len(order):
            problems.append(f"runs[{index}].phases: {order} are not phase_split's phases {names} in their order")
    unused = [name for name in names if name not in found]
    if unused and not problems:
        problems.append(f"phase_split.phases: {unused} is in no run's phases")
    return problems


def check_generation(run: Run, where: str = "runs[0]") -> list[str]:
    """A generate-like run's token figures agree with its phases: one token per step (the phases' ``steps``),
    the first token within the run, and the rates its tokens over its time (decode's over the decode phase)."""
    figures, phases = run.generation, {phase.name: phase for phase in run.phases or ()}
    assert figures is not UNSET, "only a run with generation figures is checked"
    run_us, made = run.timing.cpu_time_us, sum(phase.steps for phase in phases.values())
    problems = []
    if figures.output_tokens != made or made < 1:
        problems.append(f"{where}.generation.output_tokens: {figures.output_tokens}, but the phases made {made}")
    if figures.ttft_us > run_us + TREE_TOLERANCE_US:
        problems.append(
            f"{where}.generation.ttft_us: {figures.ttft_us:.3g} µs is longer than the run ({run_us:.3f} µs)"
        )
    decode = phases.get("decode")
    decode_steps, decode_us = (decode.steps, decode.cpu_time_us) if decode else (0, 0.0)
    rates = [("tokens_per_second", figures.tokens_per_second, made, run_us)]
    if figures.decode_tokens_per_second is not UNSET:
        rates.append(("decode_tokens_per_second", figures.decode_tokens_per_second, decode_steps, decode_us))
    for key, rate, tokens, time_us in rates:
        expected = tokens / time_us * 1e6 if time_us > 0 else 0.0
        if not math.isclose(rate, expected, rel_tol=ADDS_UP_TOLERANCE, abs_tol=ADDS_UP_TOLERANCE):
            problems.append(
                f"{where}.generation.{key}: {rate:.4g}, but {tokens} token(s) in {time_us:.3f} µs make {expected:.4g}"
            )
    per_token = figures.time_per_output_token_us
    if per_token is not UNSET:
        for key, value in (("median", per_token.median), ("p90", per_token.p90)):
            if value > decode_us + TREE_TOLERANCE_US:
                problems.append(
                    f"{where}.generation.time_per_output_token_us.{key}: {value:.3g} µs is longer than the decode phase"
                )
    return problems


def check_device_pairs(run: Run, where: str = "runs[0]") -> list[str]:
    """A device time comes with its fraction and a fraction with its time, in the residual and every region."""
    parts = [run.residual, *run.regions]
    unpaired = [
        index
        for index, part in enumerate(parts)
        if (part.device_time_us is UNSET) is not (part.device_time_fraction is UNSET)
    ]
    problems = []
    for index in unpaired:  # the path is spelled out only for these
        part, path = parts[index], ("residual",) if index == 0 else ("regions", index - 1)
        present, missing = (
            ("device_time_us", "device_time_fraction")
            if part.device_time_us is not UNSET
            else ("device_time_fraction", "device_time_us")
        )
        problems.append(f"{where}.{json_path(path)}: {present!r} without {missing!r}; write both or neither")
    return problems


def check_statistics_regions(section: Section) -> list[str]:
    """Each of ``statistics.regions`` names its region by a string ``region_id``; its other keys are summaries."""
    statistics = section.statistics
    if statistics is UNSET or statistics.regions is UNSET:
        return []
    problems = []
    for index, entry in enumerate(statistics.regions):
        if not isinstance(entry.get("region_id"), str):
            problems.append(f"statistics.regions[{index}]: 'region_id' is a required property (a string)")
        problems += [
            f"statistics.regions[{index}].{key}: {shortened(repr(value))} is not of type 'object'"
            for key, value in entry.items()
            if key != "region_id" and isinstance(value, str)
        ]
    return problems


def check_times_resolved(run: Run, where: str = "runs[0]") -> list[str]:
    """The times readers divide by (the run's, its phases', its regions' counted operators') are 0 or at least
    `TIME_RESOLUTION_US`."""
    timing = run.timing
    values = [timing.cpu_time_us, timing.wall_time_us or 0.0, timing.device_time_us or 0.0]
    values += [phase.cpu_time_us for phase in run.phases or ()]
    values += [region.work.counted_cpu_time_us for region in run.regions if region.work]
    values += [region.work.counted_device_time_us or 0.0 for region in run.regions if region.work]
    if not [value for value in values if 0 < value < TIME_RESOLUTION_US]:
        return []  # the everyday case: no path is spelled out
    return [
        f"{where}.{json_path(path)}: {value:.3g} µs is below the trace clock's 1 ns resolution; a measured time is "
        f"0 or at least {TIME_RESOLUTION_US} µs"
        for path, value in _divided_times(run)
        if 0 < value < TIME_RESOLUTION_US
    ]


def _divided_times(run: Run) -> list[tuple[tuple[str | int, ...], float]]:
    """The times of a run that readers divide by, each with its path in the run."""
    timing = run.timing
    times: list[tuple[tuple[str | int, ...], float]] = [(("timing", "cpu_time_us"), timing.cpu_time_us)]
    if timing.wall_time_us is not UNSET:
        times.append((("timing", "wall_time_us"), timing.wall_time_us))
    if timing.device_time_us is not UNSET:
        times.append((("timing", "device_time_us"), timing.device_time_us))
    times += [(("phases", i, "cpu_time_us"), phase.cpu_time_us) for i, phase in enumerate(run.phases or ())]
    for i, region in enumerate(run.regions):
        work = region.work
        if work is not UNSET:
            times.append((("regions", i, "work", "counted_cpu_time_us"), work.counted_cpu_time_us))
            if work.counted_device_time_us is not UNSET:
                times.append((("regions", i, "work", "counted_device_time_us"), work.counted_device_time_us))
    return times
