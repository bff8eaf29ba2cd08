"""What a document's ``regions`` entries say about each region id: module type, entry method, input shapes.

An entry-method region (``untuned_module:vae.decode``) stands for its module (``vae``): suggest
targets the module, and compare lines the method up with a wrapper of the module that replaced it.
Our captures mark such a region with ``method``; AITune's files (and older captures) mark none, so
there the last part of the path is read as a method when it is one of `ENTRY_METHOD_NAMES`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aitune.markers import region_path

ENTRY_METHOD_NAMES = frozenset({"generate", "decode", "encode"})
"""Read as entry methods in profiles whose regions do not mark their ``method`` (AITune's, older ones)."""


class RegionIndex:
    """The ``regions`` entries of one document by region id, and whether any of them marks its ``method``."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        self.meta: dict[str, Mapping[str, Any]] = {region["id"]: region for region in doc.get("regions", ())}
        self.marked = any("method" in region for region in self.meta.values())

    def module_path(self, region_id: str) -> tuple[str, str | None]:
        """(module path, entry method or None): ``untuned_module:vae.decode`` → ``("vae", "decode")``.

        A root object's entry method (``untuned_module:generate``) has the module path ``""``.
        """
        name = region_path(region_id)
        if self.marked:
            method = self.meta.get(region_id, {}).get("method")
        else:
            last = name.rpartition(".")[2]
            method = last if last in ENTRY_METHOD_NAMES else None
        if method is None or not (name == method or name.endswith("." + method)):
            return name, None
        return name[: -len(method)].rstrip("."), method
