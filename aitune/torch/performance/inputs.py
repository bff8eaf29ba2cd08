"""The profiled input: how ``input_data`` becomes call arguments, and its value-free signature."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import torch


def normalize_input(input_data: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """AITune's convention: mapping → kwargs, tuple → args, None → no arguments, else one argument.

    >>> normalize_input({"prompt": "a cat"})
    ((), {'prompt': 'a cat'})
    """
    if input_data is None:
        return (), {}
    if isinstance(input_data, Mapping):
        return (), dict(input_data)
    if isinstance(input_data, tuple):
        return input_data, {}
    return (input_data,), {}


def input_summary(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Counts, keyword names and the tensor signature (path, shape, dtype, device; never values)."""
    signature: list[dict[str, Any]] = []
    for index, value in enumerate(args):
        _collect_tensors(value, f"args[{index}]", signature)
    for name, value in kwargs.items():
        _collect_tensors(value, f"kwargs.{name}", signature)
    return {"args_count": len(args), "kwargs": list(kwargs), "signature": signature}


def _collect_tensors(value: Any, path: str, out: list[dict[str, Any]]) -> None:
    if isinstance(value, torch.Tensor):
        out.append(
            {
                "path": path,
                "shape": list(value.shape),
                "dtype": str(value.dtype).removeprefix("torch."),
                "device": str(value.device),
            }
        )
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _collect_tensors(item, f"{path}[{index}]", out)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _collect_tensors(item, f"{path}.{key}", out)


PLAIN_VALUES = (torch.Tensor, int, float, complex, str, bytes, type(None), torch.dtype, torch.device)
"""Values a compiled graph takes or returns as they are (``bool`` is an ``int``); lists, tuples and
mappings of them (a Hugging Face ``ModelOutput`` is an ``OrderedDict``) are plain too."""
MAX_STATE_DEPTH = 4
MAX_STATE_ITEMS = 64
"""How far `carries_state` looks: containers nested deeper, and items past the first of each, are not looked at."""


def carries_state(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is, or holds within `MAX_STATE_DEPTH` containers, an object that is neither a
    `PLAIN_VALUES` value nor a list, tuple or mapping: an object with state, such as a Hugging Face
    ``DynamicCache``, which ONNX Runtime cannot take and dynamo must guard and replay on every call.

    >>> carries_state({"logits": torch.zeros(1), "past": [torch.zeros(1), None]})
    False
    >>> carries_state((torch.zeros(1), object()))
    True
    """
    if isinstance(value, PLAIN_VALUES) or depth > MAX_STATE_DEPTH:
        return False
    if isinstance(value, list | tuple):
        items: Any = value
    elif isinstance(value, Mapping):
        items = value.values()
    else:
        return True
    return any(carries_state(item, depth + 1) for item in itertools.islice(items, MAX_STATE_ITEMS))


TOKEN_ARGUMENTS = ("input_ids", "decoder_input_ids", "inputs_embeds", "decoder_inputs_embeds")
"""Keyword arguments that hold a call's tokens in Hugging Face models, looked up first."""


def sequence_length(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> int | None:
    """The tokens one call takes: dimension 1 of its token argument (`TOKEN_ARGUMENTS`), else of
    its first tensor argument with at least two dimensions; None when it has none.

    Only the top level of the arguments is looked at, so a call costs a few lookups (the shape
    recording run calls it once per call of a top-level region).

    >>> sequence_length((), {"input_ids": torch.zeros(1, 8, dtype=torch.long)})
    8
    """
    for name in TOKEN_ARGUMENTS:
        value = kwargs.get(name)
        if isinstance(value, torch.Tensor) and value.dim() >= 2:
            return int(value.shape[1])
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor) and value.dim() >= 2:
            return int(value.shape[1])
    return None
