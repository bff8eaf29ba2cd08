"""Validation of a profile document: decoded into its typed model, plus the invariants a type cannot say.

`aitune.report.model` is the one written definition. A document's bytes are checked while they are parsed
(`decode_profile`: types, ranges, enums, required fields, in msgspec's C decoder), a document built in
Python by converting it (`validate`); the invariants (fractions that add up, children inside their
parents, phases consistent, `aitune.report.invariants`) then run once on the typed record. Only a
document the model refuses is walked again, field by field, to list every problem (`typed_problems`),
each one line that starts with its JSON path (`aitune.report.problems`).

Keys the model does not name are no part of the document: decoding leaves them out, so no reader sees
them and nothing in them needs checking.
"""

from __future__ import annotations

from typing import Any

import msgspec

from aitune.report.invariants import profile_problems
from aitune.report.model import Profile
from aitune.report.problems import json_path, number_problems, problems_in

_DECODER = msgspec.json.Decoder(Profile)


def decode_profile(data: bytes) -> Profile:
    """The profile that the JSON ``data`` holds, checked against the model while it is parsed.

    `msgspec.ValidationError` when the document is no `Profile` (`refused_problems` of the parsed document
    lists why), `msgspec.DecodeError` when it is no JSON, `RecursionError` when it nests past the
    interpreter's limit; the invariants are the caller's (`profile_problems`).
    """
    return _DECODER.decode(data)


def validate(doc: Any) -> list[str]:
    """Every problem of ``doc`` (a parsed or built document) as a profile document, each naming its JSON
    path; [] when valid."""
    try:
        profile = msgspec.convert(doc, Profile)
    except msgspec.ValidationError:
        return refused_problems(doc)
    return profile_problems(profile)


def refused_problems(doc: Any) -> list[str]:
    """Every problem of ``doc``, a document that does not convert into `Profile`, in the order of their paths:
    a number that is no figure where the model wants one is named as such (an integer that large reads as a
    float, and would be called a wrong type)."""
    typed = typed_problems(doc)
    places = {_path_order(problem) for problem in typed}
    too_large = [problem for problem in number_problems(doc) if _path_order(problem) in places]
    replaced = {_path_order(problem) for problem in too_large}
    return sorted(too_large + [problem for problem in typed if _path_order(problem) not in replaced], key=_path_order)


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
