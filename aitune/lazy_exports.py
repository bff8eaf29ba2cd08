"""A package's names loaded from their modules on first use (PEP 562): importing the package costs nothing more.

A command that reads one document imports the few modules it uses, not every module its package's
``__init__`` names (the trace analysis and numpy, the Markdown renderer).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(
    package: str, home_of: dict[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose name ``N`` lives in module ``home_of[N]``.

    A name is imported on first use and kept in ``namespace`` (the package's globals), so the next
    use is a plain attribute.
    """

    def __getattr__(name: str) -> Any:
        if name not in home_of:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home_of[name]}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *home_of})

    return __getattr__, __dir__
