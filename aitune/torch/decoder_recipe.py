"""The recipe transformers documents for a decoder's ``generate``: a static cache and the decoder step compiled whole.

A ``generate`` grows a `DynamicCache` step by step, so a compiled decoder step sees new shapes at every
token; with ``generation_config.cache_implementation = "static"`` the cache is allocated once at its full
length and every step has the same shapes, so a compiler builds one graph for the steps (and CUDA graphs
can replay it on a GPU). The loop offers it as a candidate beside compiling the modules, judged by the same
gate, task gate and end-to-end check; a plan records the setting (``generation``) and applying the plan
sets it again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

STATIC_CACHE: Mapping[str, str] = {"cache_implementation": "static"}
"""The generation settings of the recipe, as a plan records them."""

RECIPE = "static cache, decoder step compiled whole"


def offers_recipe(obj: Any) -> bool:
    """True for a transformers model with a ``generate`` whose cache can be static and is not already."""
    config = getattr(obj, "generation_config", None)
    return (
        callable(getattr(obj, "generate", None))
        and config is not None
        and getattr(config, "cache_implementation", None) is None
        and getattr(obj, "_can_compile_fullgraph", False) is True
    )


def swap_generation(obj: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
    """Set ``settings`` on ``obj.generation_config``; the values they replaced, to swap back."""
    config = obj.generation_config
    earlier = {key: getattr(config, key, None) for key in settings}
    for key, value in settings.items():
        setattr(config, key, value)
    return earlier


@contextmanager
def generation(obj: Any, settings: Mapping[str, Any]) -> Iterator[None]:
    """``settings`` on ``obj.generation_config`` for a while, the earlier values after."""
    earlier = swap_generation(obj, settings)
    try:
        yield
    finally:
        swap_generation(obj, earlier)
