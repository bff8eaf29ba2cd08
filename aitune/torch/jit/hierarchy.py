"""Names and views of the JIT call hierarchy.

A module's place is found on its first call, from the stack of patched modules executing at that
moment: its parent is the innermost one. Its name is its attribute path inside the parent
(``blocks.0``), or its class name when the parent does not own it; a topmost module is named by its
class. Fully qualified names join the path from the topmost module and are made unique with a suffix.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from torch import nn

from aitune.torch.tuning.wrapper import sanitize_name


class Node(Protocol):
    """What the views need from a patched module."""

    fq_name: str
    module: nn.Module
    children: list[Node]

    @property
    def label(self) -> str: ...


def local_name(module: nn.Module, parent: nn.Module | None) -> str:
    """The module's attribute path inside ``parent``, or its class name when ``parent`` does not own it."""
    if parent is not None:
        for path, candidate in parent.named_modules():
            if candidate is module and path:
                return sanitize_name(path)
    return sanitize_name(type(module).__name__)


def unique_name(wanted: str, taken: set[str]) -> str:
    """``wanted``, or ``wanted_1``, ``wanted_2``, … when taken."""
    candidate, index = wanted, 1
    while candidate in taken:
        candidate, index = f"{wanted}_{index}", index + 1
    return candidate


def fq_name(parent_fq: str | None, local: str) -> str:
    return f"{parent_fq}.{local}" if parent_fq else local


def hierarchy_lines(heads: Sequence[Node]) -> list[str]:
    """One indented line per module, depth first: ``fq name [state] (Class)``."""
    if not heads:
        return ["JIT tuning hierarchy: no patched module has run yet"]
    lines = ["JIT tuning hierarchy:"]
    for head in heads:
        lines += _subtree_lines(head, 1)
    return lines


def _subtree_lines(node: Node, depth: int) -> list[str]:
    lines = [f"{'  ' * depth}{node.fq_name} [{node.label}] ({type(node.module).__name__})"]
    for child in node.children:
        lines += _subtree_lines(child, depth + 1)
    return lines


def history_lines(history: Iterable[str]) -> list[str]:
    entries = list(history)
    return ["JIT tuning history:", *(f"  {entry}" for entry in entries)] if entries else ["JIT tuning history: empty"]
