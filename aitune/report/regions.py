"""What a document's ``regions`` entries say about each region id: module type, entry method, input shapes.

An entry-method region (``untuned_module:vae.decode``) stands for its module (``vae``): suggest
targets the module, and compare lines the method up with a wrapper of the module that replaced it.
Our captures mark such a region with ``method``; AITune's files (and older captures) mark none, so
there the last part of the path is read as a method when it is one of `ENTRY_METHOD_NAMES`.
"""

from __future__ import annotations

from aitune.markers import region_path
from aitune.report.model import ProfileLike, RegionMeta, as_profile, given

ENTRY_METHOD_NAMES = frozenset({"generate", "decode", "encode"})
"""Read as entry methods in profiles whose regions do not mark their ``method`` (AITune's, older ones)."""


class RegionIndex:
    """The ``regions`` entries of one document by region id, and whether any of them marks its ``method``."""

    def __init__(self, doc: ProfileLike) -> None:
        regions = as_profile(doc).regions
        self.meta: dict[str, RegionMeta] = {region.id: region for region in regions}
        self._methods = {region.id: given(region.method, None) for region in regions}
        self.marked = any(method is not None for method in self._methods.values())

    def module_path(self, region_id: str) -> tuple[str, str | None]:
        """(module path, entry method or None): ``untuned_module:vae.decode`` → ``("vae", "decode")``.

        A root object's entry method (``untuned_module:generate``) has the module path ``""``.
        """
        name = region_path(region_id)
        if self.marked:
            method = self._methods.get(region_id)
        else:
            last = name.rpartition(".")[2]
            method = last if last in ENTRY_METHOD_NAMES else None
        if method is None or not (name == method or name.endswith("." + method)):
            return name, None
        return name[: -len(method)].rstrip("."), method
