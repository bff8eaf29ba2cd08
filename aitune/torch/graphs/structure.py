"""A call's input structure as plain JSON that aitune writes and parses itself.

The structure of ``(args, kwargs)`` is ``{"args": [NODE, ...], "kwargs": {"name": NODE, ...}}`` where a
NODE is one of ``{"tensor": dtype, "rank": n}``, ``{"value": JSON scalar}``, ``{"float": "nan"|"inf"|"-inf"}``,
``{"object": "module.QualName"}`` (any other object: its type name only, never its value or repr),
``{"tuple": [...]}``, ``{"list": [...]}`` or ``{"dict": {str: NODE}}``. Leaves are numbered depth
first. Reading one never imports anything and never calls torch's pytree loaders (whose enum hook
imports a module named in the file): a structure from a plan is data.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from aitune.errors import TuningError

MAX_DEPTH = 32
MAX_NODES = 10_000
MAX_NAME = 200
_DTYPE_LIST = "float64 float32 float16 bfloat16 complex64 complex128 int64 int32 int16 int8 uint8 bool"
DTYPES: dict[str, torch.dtype] = {name: getattr(torch, name) for name in _DTYPE_LIST.split()}
"""The tensor dtypes a structure may name; a rebuilt graph allocates only these."""
_DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}
_TYPE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.<>]*")
_SCALARS = (bool, int, float, str, type(None))
_TENSOR, _VALUE, _OBJECT, _TUPLE, _LIST, _DICT = range(6)


def signature(args: tuple[Any, ...], kwargs: dict[str, Any], leaves: list[Any]) -> tuple[Any, ...]:
    """A hashable key of the call's structure that holds no user object; appends the leaves in order."""
    return (_sig(args, leaves, 0), _sig(kwargs, leaves, 0))


def _sig(obj: Any, leaves: list[Any], depth: int) -> tuple[Any, ...]:
    kind = type(obj)
    if isinstance(obj, torch.Tensor):
        leaves.append(obj)
        return (_TENSOR, obj.dtype, obj.dim())
    if kind in _SCALARS:
        leaves.append(obj)
        return (_VALUE, kind, obj)
    if depth < MAX_DEPTH:
        if kind is tuple or kind is list:
            return (_TUPLE if kind is tuple else _LIST, *[_sig(item, leaves, depth + 1) for item in obj])
        if kind is dict and all(type(key) is str for key in obj):
            return (_DICT, tuple(obj), *[_sig(value, leaves, depth + 1) for value in obj.values()])
    leaves.append(obj)
    return (_OBJECT, kind)


def encode(key: tuple[Any, ...]) -> str:
    """The structure JSON of a `signature`; `structure_id` of it is the graph id."""
    args, kwargs = (_node(part) for part in key)
    return json.dumps({"args": args["tuple"], "kwargs": kwargs["dict"]}, separators=(",", ":"))


def _node(sig: tuple[Any, ...]) -> dict[str, Any]:
    tag = sig[0]
    if tag == _TENSOR:
        return {"tensor": _DTYPE_NAMES.get(sig[1], str(sig[1]).removeprefix("torch.")), "rank": sig[2]}
    if tag == _VALUE:
        value = sig[2]
        if isinstance(value, float) and not math.isfinite(value):
            return {"float": str(value)}
        return {"value": value}
    if tag == _OBJECT:
        return {"object": qualified_name(sig[1])}
    if tag == _DICT:
        return {"dict": {key: _node(child) for key, child in zip(sig[1], sig[2:], strict=True)}}
    return {"tuple" if tag == _TUPLE else "list": [_node(child) for child in sig[1:]]}


def qualified_name(kind: type) -> str:
    """``module.QualName`` of a type, bounded in length."""
    return f"{kind.__module__}.{kind.__qualname__}"[:MAX_NAME]


def structure_id(structure: dict[str, Any]) -> str:
    """The graph id: 12 hex digits of the SHA-1 of the compact JSON, keys in stored order."""
    return hashlib.sha1(json.dumps(structure, separators=(",", ":")).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Leaf:
    """One leaf of a parsed structure: ``kind`` is tensor, value or object."""

    kind: str
    dtype: str | None = None
    rank: int | None = None
    value: Any = None  # the scalar of a value leaf; the type name of an object leaf


@dataclass(frozen=True)
class Structure:
    """A parsed, validated structure: the JSON node and its leaves in order."""

    node: dict[str, Any]
    leaves: tuple[Leaf, ...]

    @property
    def objects(self) -> list[str]:
        """The type names of the opaque object leaves; a structure with any cannot be rebuilt synthetically."""
        return [leaf.value for leaf in self.leaves if leaf.kind == "object"]

    def rebuild(self, values: list[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """``(args, kwargs)`` with ``values`` (one per leaf, in order) at the leaves."""
        it = iter(values)
        return tuple(_build(node, it) for node in self.node["args"]), {
            key: _build(node, it) for key, node in self.node["kwargs"].items()
        }


def _build(node: dict[str, Any], values: Iterator[Any]) -> Any:
    if "tuple" in node:
        return tuple(_build(child, values) for child in node["tuple"])
    if "list" in node:
        return [_build(child, values) for child in node["list"]]
    if "dict" in node:
        return {key: _build(child, values) for key, child in node["dict"].items()}
    return next(values)


def parse_structure(data: Any, where: str = "the graph structure") -> Structure:
    """Check ``data`` is a structure as this module writes it; `TuningError` in one sentence otherwise."""
    if not isinstance(data, dict) or set(data) != {"args", "kwargs"}:
        _refuse(where, "", 'is not an object with exactly the keys "args" and "kwargs"')
    if not isinstance(data["args"], list) or not isinstance(data["kwargs"], dict):
        _refuse(where, "", '"args" must be a list and "kwargs" an object')
    leaves: list[Leaf] = []
    counter = [0]
    _check({"tuple": data["args"]}, "args", 0, leaves, counter, where)
    _check({"dict": data["kwargs"]}, "kwargs", 0, leaves, counter, where)
    return Structure(node=data, leaves=tuple(leaves))


def _check(node: Any, path: str, depth: int, leaves: list[Leaf], counter: list[int], where: str) -> None:
    counter[0] += 1
    if counter[0] > MAX_NODES:
        _refuse(where, path, f"has more than {MAX_NODES} nodes")
    if depth > MAX_DEPTH:
        _refuse(where, path, f"nests deeper than {MAX_DEPTH} levels")
    if not isinstance(node, dict) or not node:
        _refuse(where, path, "is not a structure node object")
    keys = set(node)
    if keys == {"tensor", "rank"}:
        rank = node["rank"]
        if node["tensor"] not in DTYPES:
            _refuse(where, path, f"names dtype {str(node['tensor'])[:40]!r}, not one of {', '.join(DTYPES)}")
        if type(rank) is not int or not 0 <= rank <= 16:
            _refuse(where, path, "has a rank that is not an integer from 0 to 16")
        leaves.append(Leaf("tensor", dtype=node["tensor"], rank=rank))
    elif keys == {"value"}:
        if type(node["value"]) not in _SCALARS or (type(node["value"]) is float and not math.isfinite(node["value"])):
            _refuse(where, path, "holds a value that is not a finite JSON scalar")
        leaves.append(Leaf("value", value=node["value"]))
    elif keys == {"float"}:
        if node["float"] not in ("nan", "inf", "-inf"):
            _refuse(where, path, 'holds a "float" that is not "nan", "inf" or "-inf"')
        leaves.append(Leaf("value", value=float(node["float"])))
    elif keys == {"object"}:
        name = node["object"]
        if not isinstance(name, str) or len(name) > MAX_NAME or not _TYPE_NAME.fullmatch(name):
            _refuse(where, path, "names an object type that is not a dotted type name")
        leaves.append(Leaf("object", value=name))
    elif keys in ({"tuple"}, {"list"}):
        (kind,) = keys
        if not isinstance(node[kind], list):
            _refuse(where, path, f'has a "{kind}" that is not a list')
        for index, child in enumerate(node[kind]):
            _check(child, f"{path}[{index}]", depth + 1, leaves, counter, where)
    elif keys == {"dict"}:
        if not isinstance(node["dict"], dict):
            _refuse(where, path, 'has a "dict" that is not an object')
        for key, child in node["dict"].items():
            if len(key) > MAX_NAME:
                _refuse(where, path, f"has a key longer than {MAX_NAME} characters")
            _check(child, f"{path}[{key!r}]", depth + 1, leaves, counter, where)
    else:
        _refuse(where, path, f"has the unknown node keys {', '.join(sorted(str(k)[:20] for k in keys)[:4])}")


def _refuse(where: str, path: str, problem: str) -> None:
    at = f" at {path[:120]}" if path else ""
    raise TuningError(f"{where}{at} {problem}; tune again to write a new plan.")
