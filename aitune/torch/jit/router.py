"""The stable forward router installed on a patched module.

One router object per module for its whole life: code that cached ``module.forward`` (frameworks
do) keeps calling the router, which routes by the module's current state, so a cached reference
runs the tuned backend after tuning and the original forward after detaching. It carries the
original forward's signature, for frameworks that inspect ``forward``'s parameters.
"""

from __future__ import annotations

import copy
from typing import Any

import wrapt
from torch import nn


class ForwardRouter(wrapt.FunctionWrapper):
    """``module.forward`` while patched: signature, name and docstring of the original, routing by ``handler``."""

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        # A copy of a patched module is a plain module: it gets its own bound original forward.
        return copy.deepcopy(self.__wrapped__, memo)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return self.__wrapped__.__reduce_ex__(protocol)


def install(module: nn.Module, router: ForwardRouter) -> None:
    """Make ``router`` the module's forward (an instance attribute, so the class is untouched)."""
    module.forward = router


def uninstall(module: nn.Module, router: ForwardRouter, had_own_forward: bool) -> None:
    """Put the module's forward back as it was, if ``router`` is still the one installed."""
    if vars(module).get("forward") is not router:
        return
    if had_own_forward:
        module.forward = router.__wrapped__
    else:
        del module.forward
