"""Names that capture writes into a trace and analysis reads back: the contract between the two.

Every span aitune opens carries one fixed prefix, so any saved trace can be re-analysed offline.
"""

SPAN_PREFIX = "aitune::"
"""Every span aitune opens starts with this."""

REGION_SPAN_PREFIX = "aitune::region::"
"""A region span is named ``aitune::region::<region id>``, e.g. ``aitune::region::untuned_module:vae.decode``."""

RUN_SPAN_PREFIX = "aitune::run::"
"""A measured run is one span named ``aitune::run::<run index>``."""

TRACE_METADATA_KEY = "aitune"
"""Top-level key of the Chrome trace holding the capture's metadata (regions, config, wall times)."""

AOT_REGION_KIND = "aot_module"
JIT_REGION_KIND = "jit_module"
UNTUNED_REGION_KIND = "untuned_module"
COMPILED_REGION_KIND = "compiled_module"
"""A module the user compiled with ``torch.compile``: one region, its inside not walked; also its document kind."""


def region_id(kind: str, name: str) -> str:
    """The stable id of a region, e.g. ``region_id("untuned_module", "vae.decode") == "untuned_module:vae.decode"``."""
    return f"{kind}:{name}"


def region_path(region: str) -> str:
    """The dotted path of a region, the same whatever its kind: ``aot_module:unet`` → ``unet``."""
    kind, separator, path = region.partition(":")
    return path if separator else kind


def region_span_name(region: str) -> str:
    """The span name under which a region's calls appear in the trace."""
    return REGION_SPAN_PREFIX + region


def run_span_name(run_index: int) -> str:
    """The span name of measured run ``run_index``."""
    return f"{RUN_SPAN_PREFIX}{run_index}"
