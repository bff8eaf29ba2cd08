"""The profiled input: how ``input_data`` becomes call arguments, and its value-free signature."""

from __future__ import annotations

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
