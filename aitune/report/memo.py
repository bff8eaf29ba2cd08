"""A document's derived views (its headline rows, a scenario's view) computed once while a command draws it.

Compare, suggest and every section of a page ask for the same views of the same document; inside a
`computed_once` block the first answer is kept and handed to the others. A document (the typed record or a
dict) neither hashes nor takes weak references, so a view is keyed by the document's ``id`` with the
document held beside it: no other object can take that id while the block lasts, and the memo ends
with the block, so a document edited between two blocks (as tests do) is read afresh. Outside a
block every call computes. Readers share a view, so none edits one (the headline rows' lists included).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")

_memo: ContextVar[dict[int, tuple[object, dict[Hashable, Any]]] | None] = ContextVar("aitune_views", default=None)


@contextmanager
def computed_once() -> Iterator[None]:
    """Within the block, each view of each document is computed once; a block inside another shares its memo."""
    if _memo.get() is not None:
        yield
        return
    token = _memo.set({})
    try:
        yield
    finally:
        _memo.reset(token)


def derived(doc: object, view: Hashable, compute: Callable[[], T]) -> T:
    """``compute()``: within `computed_once`, the value it gave for this document and ``view`` the first time."""
    memo = _memo.get()
    if memo is None:
        return compute()
    _, views = memo.setdefault(id(doc), (doc, {}))
    if view not in views:
        views[view] = compute()
    return views[view]
