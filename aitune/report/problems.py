"""Problems of a value as a model type, in words a user reads: each one line that starts with its JSON path.

Shared by every typed document (the profile, a tuning plan, a loop report): `problems_in` walks a value
that a model type refused, field by field, for all of its problems; `problem_message` turns msgspec's
message into ``runs[0].residual.cpu_time_fraction: -0.2 is less than the minimum of 0``; a value quoted
in it is cut to `QUOTED_CHARS` characters, so a wrong table reads as one short line, not the whole table.
"""

from __future__ import annotations

import math
import re
import types
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import msgspec

from aitune.report.model import MAX_FIGURE

QUOTED_CHARS = 40
"""Longest value quoted in a problem; the JSON path says where the whole value is."""


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


def first_problem(value: Any, kind: Any) -> str:
    """The first problem of ``value``, a value that does not convert into ``kind``, in path order: ``path: problem``."""
    where, problem = min(problems_in(value, kind, ()), key=lambda found: json_path(found[0]))
    return f"{json_path(where)}: {problem}"


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
    choices = _choices(kind)
    if message.startswith("Invalid enum value") and choices is not None:
        return f"{quoted} is not one of {', '.join(map(repr, choices))}"
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


def _choices(kind: Any) -> tuple[Any, ...] | None:
    """The values of ``kind``'s ``Literal``, alone or in a union (an optional enum); None when it has none."""
    kind = _bare(kind)
    members = get_args(kind) if get_origin(kind) in (Union, types.UnionType) else (kind,)
    return next((get_args(_bare(member)) for member in members if get_origin(_bare(member)) is Literal), None)


def _number(text: str) -> str:
    """``0.0`` → ``0``: a bound as the schema writes it."""
    return text[:-2] if text.endswith(".0") else text


def shortened(text: str, limit: int = QUOTED_CHARS) -> str:
    """``text`` cut to ``limit`` characters, the cut marked with an ellipsis.

    >>> shortened("{'sort_by': 'cpu_time_total', 'row_limit': 20, 'events': []}", 24)
    "{'sort_by': 'cpu_time_t…"
    """
    return text if len(text) <= limit else text[: limit - 1] + "…"


def number_problems(doc: Any) -> list[str]:
    """Every number of ``doc`` that is no figure: NaN, ±Infinity (JSON has neither), or larger than `MAX_FIGURE`.

    The model bounds the numbers it types; this walk finds those outside it too (unknown keys, free-form
    tables), and only paths of the few it refuses are built.
    """
    return [f"{json_path(path)}: {too_large_message(value)}" for path, value in numbers(doc, _no_figure)]


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
