"""Names that capture writes into a trace and analysis reads back: the contract between the two.

Every span aitune opens carries one fixed prefix, so any saved trace can be re-analysed offline.
The markers other tools write (NVIDIA AITune 0.6, a plain torch.profiler session) are named here
too: analysis translates them into aitune's names when it reads such a trace.
"""

from __future__ import annotations

import re
from typing import NamedTuple

SPAN_PREFIX = "aitune::"
"""Every span aitune opens starts with this."""

REGION_SPAN_PREFIX = "aitune::region::"
"""A region span is named ``aitune::region::<region id>``, e.g. ``aitune::region::untuned_module:vae.decode``."""

RUN_SPAN_PREFIX = "aitune::run::"
"""A measured run is one span named ``aitune::run::<run index>``."""

TRACE_METADATA_KEY = "aitune"
"""Top-level key of the Chrome trace holding the capture's metadata (regions, config, wall times)."""

OPERATOR_RUN_WALLS_KEY = "operator_run_wall_times_us"
"""The metadata key of the operator runs' wall µs (the measured runs' are ``run_wall_times_us``)."""

PLAIN_WALLS_KEY = "plain_wall_times_us"
"""The metadata key of plain calls made after the measured runs, the capture overhead's baseline, when
the measured runs showed that the warmups had ended before the run time was steady."""

AOT_REGION_KIND = "aot_module"
JIT_REGION_KIND = "jit_module"
UNTUNED_REGION_KIND = "untuned_module"
COMPILED_REGION_KIND = "compiled_module"
"""A module the user compiled with ``torch.compile``: one region, its inside not walked; also its document kind."""


class RegionKind(NamedTuple):
    """One kind of region, in its two spellings: the prefix of its ids and the ``kind`` of a profile's region."""

    id_prefix: str  # aot_module, in the id aot_module:unet
    document_kind: str  # aot_managed_module, in regions[].kind (AITune's documented spelling)
    managed: bool  # wrapped or patched by aitune: tuned, or tuned through it


REGION_KINDS = (
    RegionKind(AOT_REGION_KIND, "aot_managed_module", managed=True),
    RegionKind(JIT_REGION_KIND, "jit_managed_module", managed=True),
    RegionKind(UNTUNED_REGION_KIND, UNTUNED_REGION_KIND, managed=False),
    RegionKind(COMPILED_REGION_KIND, COMPILED_REGION_KIND, managed=False),
)
"""Every region kind: the one table that ids, documents, compare, suggest and the viewer read."""

UNTUNED = REGION_KINDS[2]
_KIND_BY_SPELLING = {spelling: kind for kind in REGION_KINDS for spelling in (kind.id_prefix, kind.document_kind)}


def region_kind(spelling: str | None) -> RegionKind:
    """The kind an id prefix or a document kind names, either spelling (older documents wrote ``aot_module``);
    untuned for anything else."""
    return _KIND_BY_SPELLING.get(spelling or "", UNTUNED)


def region_id(kind: str, name: str) -> str:
    """The stable id of a region, e.g. ``region_id("untuned_module", "vae.decode") == "untuned_module:vae.decode"``."""
    return f"{kind}:{name}"


def parse_region_id(region: str) -> tuple[RegionKind, str]:
    """The one parser of region ids: (kind, dotted path).

    ``aot_module:unet`` → (aot, ``unet``), and so does the document spelling ``aot_managed_module:unet``;
    an id without a known kind prefix is an untuned region whose path is the whole id
    (``x:`` → (untuned, ``x:``), ``encoder`` → (untuned, ``encoder``)).
    """
    prefix, separator, path = region.partition(":")
    kind = _KIND_BY_SPELLING.get(prefix) if separator else None
    return (UNTUNED, region) if kind is None else (kind, path)


def region_path(region: str) -> str:
    """The dotted path of a region, the same whatever its kind: ``aot_module:unet`` → ``unet``."""
    return parse_region_id(region)[1]


_PATH_PART = r"(?:(?!__)[A-Za-z_][A-Za-z0-9_]{0,127}|[0-9]{1,6})"
MODULE_PATH_PATTERN = rf"(?:{_PATH_PART}(?:\.{_PATH_PART}){{0,31}})?"
"""The one rule of a module path, as ``aitune.torch.wrap``, ``--targets``, suggest and plans take it: dotted
ASCII identifiers (not starting with ``__``) and the indices of ``nn.Sequential``/``nn.ModuleList`` children
(``0``, ``layers.3``, ``blocks.1.attn``), at most 32 parts, or the empty path (the object itself). A plan is
untrusted: no ``..``, no empty part, no dunder attribute, bounded lengths (``plan.schema.json`` holds it too)."""
MAX_MODULE_PATH_CHARS = 512
_MODULE_PATH = re.compile(MODULE_PATH_PATTERN)


def is_module_path(path: str) -> bool:
    """Whether ``path`` names a module by the one rule, `MODULE_PATH_PATTERN`: ``features.0.conv`` yes, ``Block_3``
    yes (an identifier), ``encoder..x``, ``__class__`` and ``nn.Module: Linear_1`` no."""
    return len(path) <= MAX_MODULE_PATH_CHARS and _MODULE_PATH.fullmatch(path) is not None


def region_span_name(region: str) -> str:
    """The span name under which a region's calls appear in the trace."""
    return REGION_SPAN_PREFIX + region


def run_span_name(run_index: int) -> str:
    """The span name of measured run ``run_index``."""
    return f"{RUN_SPAN_PREFIX}{run_index}"


def span_region_id(span_name: str) -> str:
    """The one reader of `region_span_name`: ``aitune::region::untuned_module:unet`` → ``untuned_module:unet``."""
    return span_name[len(REGION_SPAN_PREFIX) :]


def span_run_index(span_name: str) -> int:
    """The one reader of `run_span_name`: ``aitune::run::3`` → 3."""
    return int(span_name[len(RUN_SPAN_PREFIX) :])


TRACE_KIND_AITUNE = "aitune"
TRACE_KIND_AITUNE_06 = "aitune-0.6"
TRACE_KIND_TORCH = "torch.profiler"
TRACE_KINDS = (TRACE_KIND_AITUNE, TRACE_KIND_AITUNE_06, TRACE_KIND_TORCH)
"""What a document's ``profiler.trace_kind`` says its events came from: an aitune capture, NVIDIA
AITune 0.6's ``aitune.torch.profile``, or a user's own torch.profiler session."""

AITUNE_06_SPAN_PREFIX = "aitune.performance."
"""NVIDIA AITune 0.6 names a region call ``aitune.performance.<region id>`` (its region ids are ours)."""

AITUNE_06_RUN_SPAN = "aitune.performance.profiled_run"
"""NVIDIA AITune 0.6's span around one measured run (inside torch's ``ProfilerStep#N``)."""

PROFILER_STEP_PREFIX = "ProfilerStep#"
"""torch.profiler's span from one ``prof.step()`` to the next: one run of a plain torch trace."""

MODULE_CALL_PREFIX = "nn.Module: "
"""With ``with_stack=True`` torch writes each module call as a python_function event
``nn.Module: <Class>_<k>``, k counting the instances of that class."""

MARKER_KEY_PREFIXES = (SPAN_PREFIX, AITUNE_06_SPAN_PREFIX, "ProfilerStep")
"""Operator-table keys that are run or region markers, not operators (torch's key averages list
annotations too: AITune's tables hold ``ProfilerStep*`` and its own spans)."""


def user_span_region_id(name: str) -> str:
    """The region of a span a plain torch trace holds: the user's ``record_function("encoder")`` is
    ``untuned_module:encoder``, a module call ``nn.Module: Linear_1`` is ``untuned_module:Linear_1``."""
    return region_id(UNTUNED_REGION_KIND, name.removeprefix(MODULE_CALL_PREFIX))
