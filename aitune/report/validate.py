"""Validation of a profile document: decoded into its typed model, plus the invariants a type cannot say.

`aitune.report.model` is the one written definition. A valid document (the everyday case) is checked by
decoding it into `Profile`, which checks types, ranges, enums and required fields while it parses; the
invariants (fractions that add up, children inside their parents, phases consistent) then run once on
the checked document. Only a document that fails the decode is walked again, field by field, to list
every problem (`typed_problems`).

Each problem is one line that starts with its JSON path, e.g.
``runs[0].residual.cpu_time_fraction: -0.2 is less than the minimum of 0``; a value quoted in it is
cut to `QUOTED_CHARS` characters, so a wrong table reads as one short line, not the whole table.
"""

from __future__ import annotations

import functools
import math
import re
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import msgspec

from aitune.report.model import MAX_FIGURE, Profile

ADDS_UP_TOLERANCE = 1e-3
"""Σ region fractions + residual fraction may differ from 1 by this much (AITune rounds its own)."""

TREE_TOLERANCE_US = 0.01
"""A child may seem to outlast its parent by a few ns of timestamp rounding, clamping the self time at 0."""

QUOTED_CHARS = 40
"""Longest value quoted in a problem; the JSON path says where the whole value is."""

TIME_RESOLUTION_US = 0.0005
"""Half the trace's 1 ns clock: a time a reader divides by (a run's, a phase's, counted operators') is a
sum or a difference of clock readings, so it is 0 or at least this; a smaller one would make a rate of
10³⁰⁰ per second."""


def validate(doc: Any) -> list[str]:
    """Every problem of ``doc`` as a profile document, each naming its JSON path; [] when valid.

    A document that converts into `Profile` has every number the model types bounded already, so only
    the values under keys the model does not name are walked for numbers; one that does not convert is
    walked whole, and every problem listed.
    """
    try:
        profile = msgspec.convert(doc, Profile)
    except msgspec.ValidationError:
        return refused_problems(doc)
    untyped = sorted(untyped_number_problems(doc, msgspec.to_builtins(profile)), key=_path_order)
    if untyped:
        return untyped
    sections = [("", doc)] + [(f"scenarios[{i}].", scenario) for i, scenario in enumerate(doc.get("scenarios", []))]
    return [f"{prefix}{problem}" for prefix, section in sections for problem in section_problems(section)]


def refused_problems(doc: Any) -> list[str]:
    """Every problem of ``doc``, a document that does not convert into `Profile`: its numbers that are no
    figure, then each other way it is no `Profile`, in the order of their paths."""
    too_large = number_problems(doc)
    places = {_path_order(problem) for problem in too_large}  # an integer that large reads as a float: say why
    problems = too_large + [problem for problem in typed_problems(doc) if _path_order(problem) not in places]
    return sorted(problems, key=_path_order)


def typed_problems(doc: Any) -> list[str]:
    """Every way ``doc`` is no `Profile`; [] when it converts.

    Converting the parsed document costs less than decoding its bytes again; it stops at the first
    problem, and only then is ``doc`` walked field by field for all of them.
    """
    try:
        msgspec.convert(doc, Profile)
    except msgspec.ValidationError:
        return [f"{json_path(path)}: {message}" for path, message in problems_in(doc, Profile, ())]
    return []


def _path_order(problem: str) -> str:
    return problem.split(": ", 1)[0]


Describe = Callable[[str, Any, Any], str]
"""Words for msgspec's message about a value of a model type (`problem_message`, or a document's own)."""


def problems_in(
    value: Any, kind: Any, path: tuple[Any, ...], describe: Describe | None = None
) -> list[tuple[tuple[Any, ...], str]]:
    """Every problem of ``value`` as a ``kind`` (a model type), each with its path under ``path``: the
    problems of its parts when it has parts, else its own, in ``describe``'s words (`problem_message`'s)."""
    try:
        msgspec.convert(value, kind)
        return []
    except msgspec.ValidationError as error:
        own = str(error)
    parts = _part_problems(value, _bare(kind), path, describe or problem_message)
    return parts or [(path, (describe or problem_message)(own, value, kind))]


def _part_problems(
    value: Any, kind: Any, path: tuple[Any, ...], describe: Describe
) -> list[tuple[tuple[Any, ...], str]]:
    """The problems of ``value``'s fields, items or entries, ``kind`` being the type of the whole."""
    origin = get_origin(kind)
    if origin in (Union, types.UnionType):
        shapes = [member for member in get_args(kind) if _holds(_bare(member), value)]
        tag_field, by_tag = _tags(shapes)
        if by_tag:  # a tagged union: the Struct its tag names, or the tag is the problem
            if value.get(tag_field) not in by_tag:
                named = shortened(repr(value.get(tag_field)))
                return [((*path, tag_field), f"{named} is not one of {', '.join(map(repr, by_tag))}")]
            shapes = [by_tag[value[tag_field]]]
        return _part_problems(value, _bare(shapes[0]), path, describe) if len(shapes) == 1 else []
    if isinstance(kind, type) and issubclass(kind, msgspec.Struct) and isinstance(value, dict):
        problems = []
        for field in msgspec.structs.fields(kind):
            if field.encode_name in value:
                problems += problems_in(value[field.encode_name], field.type, (*path, field.encode_name), describe)
            elif field.required:
                problems.append((path, f"{field.encode_name!r} is a required property"))
        return problems
    if origin is list and isinstance(value, list):
        (item,) = get_args(kind)
        return [
            problem for index, part in enumerate(value) for problem in problems_in(part, item, (*path, index), describe)
        ]
    if origin is dict and isinstance(value, dict):
        key_kind, item = get_args(kind)
        problems = []
        for key, part in value.items():
            problems += [((*path, key), f"the key {message}") for _, message in problems_in(key, key_kind, ())]
            problems += problems_in(part, item, (*path, key), describe)
        return problems
    return []


def _tags(members: list[Any]) -> tuple[str | None, dict[Any, Any]]:
    """The tag field of a union of tagged Structs and each member by its tag; (None, {}) for any other union."""
    configs = [getattr(_bare(member), "__struct_config__", None) for member in members]
    if len(members) < 2 or not all(config is not None and config.tag_field for config in configs):
        return None, {}
    return configs[0].tag_field, {config.tag: _bare(member) for member, config in zip(members, configs, strict=True)}


def _bare(kind: Any) -> Any:
    """``kind`` without its ``Annotated`` constraints."""
    return get_args(kind)[0] if get_origin(kind) is Annotated else kind


def _holds(kind: Any, value: Any) -> bool:
    """Whether ``kind`` is the JSON shape of ``value`` (an object or an array), so its parts can be checked."""
    if isinstance(value, dict):
        return get_origin(kind) is dict or (isinstance(kind, type) and issubclass(kind, msgspec.Struct))
    return isinstance(value, list) and get_origin(kind) is list


_JSON_TYPES = {"int": "integer", "float": "number", "str": "string", "bool": "boolean", "null": "null"}
_EXPECTED = re.compile(r"Expected `([^`]*)`(?:, got `[^`]*`)?(?: (>=|<=|>|<) (\S+))?(?: of length (>=|<=) (\d+))?")
_BOUND_WORDS = {">=": "is less than the minimum of", "<=": "is greater than the maximum of"}


def problem_message(message: str, value: Any, kind: Any) -> str:
    """msgspec's ``message`` about ``value`` (of model type ``kind``) in the words of a problem line:
    the value quoted first, shortened, then what is wrong with it (msgspec's own path is left out)."""
    message = message.split(" - at `", 1)[0]
    quoted = shortened(repr(value))
    literal = _bare(kind)
    if message.startswith("Invalid enum value") and get_origin(literal) is Literal:
        return f"{quoted} is not one of {', '.join(map(repr, get_args(literal)))}"
    match = _EXPECTED.fullmatch(message)
    if match is None:
        return f"{quoted}: {message[:1].lower()}{message[1:]}"
    names, bound, limit, length_bound, length = match.groups()
    if bound and isinstance(value, (int, float)) and (abs(float(limit)) == MAX_FIGURE or not math.isfinite(value)):
        return too_large_message(value)  # NaN fails the first bound it meets, and is no figure at all
    if bound:
        return f"{quoted} {_BOUND_WORDS.get(bound, bound)} {_number(limit)}"
    if length_bound:
        shorter = length_bound == ">="
        return f"{quoted} is too {'short' if shorter else 'long'} (at {'least' if shorter else 'most'} {length})"
    wanted = " or ".join(repr(_JSON_TYPES.get(name, name)) for name in names.split(" | "))
    return f"{quoted} is not of type {wanted}"


def _number(text: str) -> str:
    """``0.0`` → ``0``: a bound as the schema writes it."""
    return text[:-2] if text.endswith(".0") else text


def shortened(text: str, limit: int = QUOTED_CHARS) -> str:
    """``text`` cut to ``limit`` characters, the cut marked with an ellipsis.

    >>> shortened("{'sort_by': 'cpu_time_total', 'row_limit': 20, 'events': []}", 24)
    "{'sort_by': 'cpu_time_t…"
    """
    return text if len(text) <= limit else text[: limit - 1] + "…"


def section_problems(section: Mapping[str, Any]) -> list[str]:
    """What no schema can say about one schema-valid document (the top level, or one of its scenarios)."""
    if not section["runs"]:  # every reader takes a median run: a capture measures at least one
        return ["runs: no measured run; capture the profile again"]
    problems = []
    for key in ("runs", "operator_runs"):
        for index, run in enumerate(section.get(key, ())):
            where = f"{key}[{index}]"
            problems += (
                check_adds_up(run, where)
                + check_tree_adds_up(run, where)
                + check_communication_adds_up(run, where)
                + check_split_level(run, section.get("spanning_regions", []), where)
                + check_phases_add_up(run, where)
                + check_times_resolved(run, where)
                + check_device_pairs(run, where)
            )
    problems += check_phase_split(section) + check_statistics_regions(section)
    for index, run in enumerate(section["runs"]):
        if "phases" in run and "generation" in run:
            problems += check_generation(run, f"runs[{index}]")
    return problems


def check_adds_up(run: Mapping[str, Any], where: str = "runs[0]") -> list[str]:
    """Per time domain present: Σ topmost-region fractions + residual fraction = 1 (within tolerance)."""
    problems = []
    for domain in ("cpu", "device"):
        key = f"{domain}_time_fraction"
        if key not in run["residual"]:
            continue
        total = run["residual"][key] + sum(region.get(key, 0.0) for region in run["regions"])
        if run["timing"].get(f"{domain}_time_us", 0) > 0 and abs(total - 1.0) > ADDS_UP_TOLERANCE:
            problems.append(f"{where}: {domain} region fractions plus residual add up to {total:.4f}, not 1")
    return problems


def check_tree_adds_up(run: Mapping[str, Any], where: str = "runs[0]") -> list[str]:
    """In a run's region tree, every node's children totals + its self time = its total, per domain."""
    gaps = _tree_gaps(_tree_nodes(run))
    if not gaps:  # the everyday case: no node's path is spelled out
        return []
    paths = _tree_paths(run, where)
    return [
        f"{paths[index]}: {domain} children plus self time is {parts:.3f} µs, not the total {total:.3f} µs"
        for index, domain, parts, total in gaps
    ]


_TREE_DOMAINS = tuple((domain, f"{domain}_self_time_us", f"{domain}_time_us") for domain in ("cpu", "device"))
"""Per domain: its name, and a tree node's self time and total time keys."""


def _tree_gaps(nodes: list[Mapping[str, Any]]) -> list[tuple[int, str, float, float]]:
    """Where a tree node's children totals + its self time miss its total: (the node's index in ``nodes``,
    domain, those, total)."""
    gaps = []
    for index, node in enumerate(nodes):
        children = node["children"]
        for domain, self_key, total_key in _TREE_DOMAINS:
            if self_key in node:
                parts = node[self_key] + (sum([child.get(total_key, 0) for child in children]) if children else 0)
                total = node[total_key]
                if abs(parts - total) > TREE_TOLERANCE_US + 1e-9 * total:
                    gaps.append((index, domain, parts, total))
    return gaps


def _tree_nodes(run: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every node of a run's region tree, in the order of `_tree_paths`."""
    nodes, stack = [], list(run.get("tree", ()))
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack += node["children"]
    return nodes


def _tree_paths(run: Mapping[str, Any], where: str) -> list[str]:
    """The JSON path of every node of a run's region tree, in the order of `_tree_nodes`."""
    paths, stack = [], [(f"{where}.tree[{i}]", node) for i, node in enumerate(run.get("tree", ()))]
    while stack:
        path, node = stack.pop()
        paths.append(path)
        stack += [(f"{path}.children[{i}]", child) for i, child in enumerate(node["children"])]
    return paths


def check_communication_adds_up(run: Mapping[str, Any], where: str = "runs[0]") -> list[str]:
    """Per key of a run's ``communication``: its regions' + its residual's = the run's."""
    total = run.get("communication")
    if total is None:
        return []
    parts = [region.get("communication", {}) for region in run["regions"]] + [run["residual"].get("communication", {})]
    problems = []
    for key in ("cpu_time_us", "device_time_us", "bytes"):
        if key in total:
            added = sum(part.get(key, 0) for part in parts)
            if abs(added - total[key]) > TREE_TOLERANCE_US + 1e-9 * total[key]:
                problems.append(
                    f"{where}.communication.{key}: regions plus residual is {added:.3f}, not {total[key]:.3f}"
                )
    return problems


def check_split_level(run: Mapping[str, Any], spanning: list[str], where: str = "runs[0]") -> list[str]:
    """With ``spanning_regions``, the run's tree starts with that chain and its ``regions`` are the last one's children.

    That is what keeps the headline adding up: the regions, the spanning regions' self times and
    the time outside them together are the run.
    """
    level = run.get("tree", [])
    for region in spanning:
        found = [node["region_id"] for node in level]
        if found != [region]:
            return [f"{where}.tree: the spanning region {region} is not alone at its level (found {found})"]
        level = level[0]["children"]
    if spanning and sorted(node["region_id"] for node in level) != sorted(r["region_id"] for r in run["regions"]):
        return [f"{where}.regions: not the children of the spanning region {spanning[-1]} in the run's tree"]
    return []


def check_phases_add_up(run: Mapping[str, Any], where: str = "runs[0]") -> list[str]:
    """A generate-like run's phases tile it (their times add up to the run's CPU time, each fraction is its
    time over the run's, so the fractions add up to 1), and within each phase its region fractions plus its
    residual fraction add up to 1."""
    phases = run.get("phases")
    if not phases:
        return []
    problems = []
    total, run_us = sum(phase["cpu_time_us"] for phase in phases), run["timing"]["cpu_time_us"]
    if abs(total - run_us) > TREE_TOLERANCE_US + ADDS_UP_TOLERANCE * run_us:
        problems.append(f"{where}.phases: the phases add up to {total:.3f} µs, not the run's {run_us:.3f} µs")
    for index, phase in enumerate(phases):
        share = phase["cpu_time_us"] / run_us if run_us > 0 else 0.0
        if abs(phase["cpu_time_fraction"] - share) > ADDS_UP_TOLERANCE:
            problems.append(
                f"{where}.phases[{index}].cpu_time_fraction: {phase['cpu_time_fraction']:.4f}, but the phase is "
                f"{share:.4f} of the run"
            )
        shares = phase["residual"]["cpu_time_fraction"] + sum(r["cpu_time_fraction"] for r in phase["regions"])
        if phase["cpu_time_us"] > 0 and abs(shares - 1.0) > ADDS_UP_TOLERANCE:
            problems.append(f"{where}.phases[{index}]: region fractions plus residual add up to {shares:.4f}, not 1")
    return problems


def check_phase_split(doc: Mapping[str, Any]) -> list[str]:
    """``phase_split`` and the runs' ``phases`` come together: with it, every run has its phases (in the split's
    order, each named in it) and its ``generation``, and every phase it names is some run's; without it, no
    run has either. Readers index a phase's rows on that promise."""
    split = doc.get("phase_split")
    if split is None:
        return [
            f"runs[{index}].{key}: present, but the document has no phase_split; drop it or add the split"
            for index, run in enumerate(doc["runs"])
            for key in ("phases", "generation")
            if key in run
        ]
    names, found = split["phases"], set()
    problems = []
    for index, run in enumerate(doc["runs"]):
        missing = [key for key in ("phases", "generation") if not run.get(key)]
        if missing:
            problems.append(f"runs[{index}]: no {' and no '.join(missing)}, but the document has a phase_split")
            continue
        order = [phase["name"] for phase in run["phases"]]
        found.update(order)
        if order != [name for name in names if name in order] or len(set(order)) != len(order):
            problems.append(f"runs[{index}].phases: {order} are not phase_split's phases {names} in their order")
    unused = [name for name in names if name not in found]
    if unused and not problems:
        problems.append(f"phase_split.phases: {unused} is in no run's phases")
    return problems


def check_generation(run: Mapping[str, Any], where: str = "runs[0]") -> list[str]:
    """A generate-like run's token figures agree with its phases: one token per step (the phases' ``steps``),
    the first token within the run, and the rates its tokens over its time (decode's over the decode phase)."""
    figures, phases = run["generation"], {phase["name"]: phase for phase in run["phases"]}
    run_us, made = run["timing"]["cpu_time_us"], sum(phase["steps"] for phase in run["phases"])
    problems = []
    if figures["output_tokens"] != made or made < 1:
        problems.append(f"{where}.generation.output_tokens: {figures['output_tokens']}, but the phases made {made}")
    if figures["ttft_us"] > run_us + TREE_TOLERANCE_US:
        problems.append(
            f"{where}.generation.ttft_us: {figures['ttft_us']:.3g} µs is longer than the run ({run_us:.3f} µs)"
        )
    decode = phases.get("decode", {})
    rates = [("tokens_per_second", made, run_us)]
    if "decode_tokens_per_second" in figures:
        rates.append(("decode_tokens_per_second", decode.get("steps", 0), decode.get("cpu_time_us", 0.0)))
    for key, tokens, time_us in rates:
        expected = tokens / time_us * 1e6 if time_us > 0 else 0.0
        if not math.isclose(figures[key], expected, rel_tol=ADDS_UP_TOLERANCE, abs_tol=ADDS_UP_TOLERANCE):
            problems.append(
                f"{where}.generation.{key}: {figures[key]:.4g}, but {tokens} token(s) in {time_us:.3f} µs "
                f"make {expected:.4g}"
            )
    per_token = figures.get("time_per_output_token_us", {})
    for key in ("median", "p90"):
        if per_token.get(key, 0.0) > decode.get("cpu_time_us", 0.0) + TREE_TOLERANCE_US:
            problems.append(
                f"{where}.generation.time_per_output_token_us.{key}: {per_token[key]:.3g} µs is longer "
                "than the decode phase"
            )
    return problems


def check_device_pairs(run: Mapping[str, Any], where: str = "runs[0]") -> list[str]:
    """A device time comes with its fraction and a fraction with its time, in the residual and every region."""
    parts = [(("residual",), run["residual"])] + [(("regions", i), region) for i, region in enumerate(run["regions"])]
    return [
        f"{where}.{json_path(path)}: {present!r} without {missing!r}; write both or neither"
        for path, part in parts
        if ("device_time_us" in part) != ("device_time_fraction" in part)  # the path is spelled out only then
        for present, missing in (("device_time_us", "device_time_fraction"), ("device_time_fraction", "device_time_us"))
        if present in part and missing not in part
    ]


def check_statistics_regions(section: Mapping[str, Any]) -> list[str]:
    """Each of ``statistics.regions`` names its region by a string ``region_id``; its other keys are summaries."""
    problems = []
    for index, entry in enumerate(section.get("statistics", {}).get("regions", ())):
        if not isinstance(entry.get("region_id"), str):
            problems.append(f"statistics.regions[{index}]: 'region_id' is a required property (a string)")
        problems += [
            f"statistics.regions[{index}].{key}: {shortened(repr(value))} is not of type 'object'"
            for key, value in entry.items()
            if key != "region_id" and not isinstance(value, dict)
        ]
    return problems


def check_times_resolved(run: Mapping[str, Any], where: str = "runs[0]") -> list[str]:
    """The times readers divide by (the run's, its phases', its regions' counted operators') are 0 or at least
    `TIME_RESOLUTION_US`."""
    times = [(("timing", key), value) for key, value in run["timing"].items() if key.endswith("_time_us")]
    times += [(("phases", i, "cpu_time_us"), phase["cpu_time_us"]) for i, phase in enumerate(run.get("phases", ()))]
    times += [
        (("regions", i, "work", key), value)
        for i, region in enumerate(run["regions"])
        for key, value in region.get("work", {}).items()
        if key.startswith("counted_") and key.endswith("_time_us")
    ]
    return [
        f"{where}.{json_path(path)}: {value:.3g} µs is below the trace clock's 1 ns resolution; a measured time is "
        f"0 or at least {TIME_RESOLUTION_US} µs"
        for path, value in times
        if 0 < value < TIME_RESOLUTION_US  # the path is spelled out only then
    ]


def number_problems(doc: Any) -> list[str]:
    """Every number of ``doc`` that is no figure: NaN, ±Infinity (JSON has neither), or larger than `MAX_FIGURE`.

    The model bounds the numbers it types; this walk finds those outside it too (unknown keys, free-form
    tables), and only paths of the few it refuses are built.
    """
    return [f"{json_path(path)}: {too_large_message(value)}" for path, value in numbers(doc, _no_figure)]


def untyped_number_problems(doc: Any, typed: Any) -> list[str]:
    """`number_problems` of the values under keys the model does not name, in a document that converts into
    `Profile`; ``typed`` is what the model reads of it (``to_builtins`` of the converted `Profile`).

    The model bounds every number it types, so those need no second look; and a part equal to what the model
    read of it holds no unknown key (dicts compare their keys), so only the parts that differ are walked.
    """
    found: list[tuple[Any, Any]] = []
    _collect_untyped(doc, typed, (_STRUCT, Profile), None, found)
    return [f"{json_path(_flat(place))}: {too_large_message(value)}" for place, value in found]


_STRUCT, _LIST, _DICT, _EITHER = range(4)
"""How a step descends: into a Struct's fields, a list's items, a dict's values, or whichever of a union's
members has the value's JSON shape."""


def _collect_untyped(value: Any, typed: Any, step: tuple[Any, ...], place: Any, found: list[tuple[Any, Any]]) -> None:
    """Append to ``found`` each number that is no figure under an unknown key inside ``value`` (of the model
    type ``step`` describes, read by the model as ``typed``), with its place: a ``(parent place, key)`` link,
    flattened only when one is found."""
    if value == typed:  # the same keys all the way down: nothing unknown inside
        return
    how, inner = step[0], step[1]
    if how == _STRUCT:
        known, fields = _struct_plan(inner)
        for key in value.keys() - known:
            if not isinstance(value[key], str):  # most unknown values are names and versions
                found += [((place, key, *path), number) for path, number in numbers(value[key], _no_figure)]
        for name, field_step in fields:
            if name in value:
                _collect_untyped(value[name], typed.get(name), field_step, (place, name), found)
    elif how == _LIST:
        for index, (item, typed_item) in enumerate(zip(value, typed, strict=True)):
            _collect_untyped(item, typed_item, inner, (place, index), found)
    elif how == _DICT:
        for key, item in value.items():
            _collect_untyped(item, typed[key], inner, (place, key), found)
    else:
        shaped = inner if isinstance(value, dict) else step[2] if isinstance(value, list) else None
        if shaped is not None:
            _collect_untyped(value, typed, shaped, place, found)


def _flat(place: Any) -> list[Any]:
    """A place of `_collect_untyped` as a JSON path's parts: ``((None, "runs"), 0, "x")`` → ``["runs", 0, "x"]``."""
    parts: list[Any] = []
    while place is not None:
        place, key, *rest = place
        parts[:0] = [key, *rest]
    return parts


@functools.cache
def _struct_plan(kind: type[msgspec.Struct]) -> tuple[frozenset[str], tuple[tuple[str, tuple[Any, ...]], ...]]:
    """The keys a Struct names, and how to descend each field that holds Structs."""
    fields = msgspec.structs.fields(kind)
    steps = ((field.encode_name, _step(field.type)) for field in fields)
    return frozenset(field.encode_name for field in fields), tuple((name, step) for name, step in steps if step)


def _step(kind: Any) -> tuple[Any, ...] | None:
    """How to descend a value of model type ``kind`` to the Structs inside it; None when it holds none."""
    kind = _bare(kind)
    origin = get_origin(kind)
    if isinstance(kind, type) and issubclass(kind, msgspec.Struct):
        return (_STRUCT, kind)
    if origin in (list, dict):
        inner = _step(get_args(kind)[-1])
        return inner and ((_LIST if origin is list else _DICT), inner)
    if origin in (Union, types.UnionType):
        steps = [step for step in map(_step, get_args(kind)) if step]
        by_dict = next((step for step in steps if step[0] != _LIST), None)
        by_list = next((step for step in steps if step[0] == _LIST), None)
        return (_EITHER, by_dict, by_list) if steps else None
    return None


def _no_figure(value: float) -> bool:
    return not -MAX_FIGURE <= value <= MAX_FIGURE  # NaN compares false


def too_large_message(value: float) -> str:
    """What is wrong with a number past `MAX_FIGURE`, the number shown short."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value} is not a finite number"
    shown = f"{value:.3g}" if isinstance(value, float) else f"an integer of {value.bit_length()} bits"
    return f"{shown} is larger than any figure a profile holds ({MAX_FIGURE:.2g})"


def non_finite(value: Any) -> Iterator[tuple[tuple[Any, ...], float]]:
    """Every NaN or ±Infinity in a JSON-like value, with its path: JSON has no such numbers."""
    return numbers(value, lambda item: isinstance(item, float) and not math.isfinite(item))


def numbers(value: Any, wanted: Any = None) -> Iterator[tuple[tuple[Any, ...], int | float]]:
    """Every number (not a boolean) in a JSON-like value for which ``wanted`` holds (all, when None), with its path.

    Walked without recursion; a container's path is built only when one of its numbers is wanted.
    """
    pending: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while pending:
        path, container = pending.pop()
        if isinstance(container, dict):
            items: Any = container.items()
        elif isinstance(container, (list, tuple)):
            items = enumerate(container)
        else:  # the document itself is a number
            if (
                isinstance(container, (int, float))
                and not isinstance(container, bool)
                and (wanted is None or wanted(container))
            ):
                yield path, container
            continue
        for key, item in items:
            if isinstance(item, (dict, list, tuple)):
                pending.append(((*path, key), item))
            elif isinstance(item, (int, float)) and not isinstance(item, bool) and (wanted is None or wanted(item)):
                yield (*path, key), item


def json_path(parts: Any) -> str:
    """``["runs", 0, "residual"]`` → ``runs[0].residual``; the empty path is ``(document)``."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(document)"
