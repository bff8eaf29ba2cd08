"""A profile's regions gathered per target path over the runs: the raw figures the targets are judged on.

A target path is what ``aitune.torch.wrap`` takes: a region's path, except that an entry method's
region (``vae.decode``) stands for its module (``vae``), and the root object's entry methods
(``generate``, path ``""``) stand for no module at all: their own time is kept apart for advice.
Only a region named by a module path (`wrappable`) becomes a candidate: a plain torch.profiler
trace names its regions by annotations and module classes (``encoder``, ``Block_3``), which
neither ``wrap`` nor ``--targets`` can take; those get advice instead (`aitune.suggest.advice`).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from msgspec import UNSET

from aitune.markers import (
    AOT_REGION_KIND,
    JIT_REGION_KIND,
    TRACE_KIND_TORCH,
    UNTUNED_REGION_KIND,
    is_module_path,
    parse_region_id,
)
from aitune.report.model import (
    ProfileLike,
    RegionMeta,
    RegionShare,
    TreeNode,
    as_profile,
    given,
    self_time_in,
    time_in,
)
from aitune.report.regions import RegionIndex
from aitune.report.samples import path_of

WRAPPABLE_KINDS = frozenset({UNTUNED_REGION_KIND, AOT_REGION_KIND, JIT_REGION_KIND})
"""Region kinds whose path names a module ``wrap`` and ``--targets`` accept (a user's compiled module does not)."""


def wrappable(doc: ProfileLike, region_id: str) -> bool:
    """Whether the region's path names a module that ``aitune.torch.wrap`` and ``--targets`` can take: a module
    path (`aitune.markers.is_module_path`: ``features.0``, ``blocks.1.attn``) of a wrappable kind, in a document
    whose regions are module paths (not a plain torch.profiler trace, whose regions are annotations and
    ``nn.Module: <Class>_<k>`` calls)."""
    if as_profile(doc).profiler.trace_kind == TRACE_KIND_TORCH:
        return False
    kind, path = parse_region_id(region_id)
    return kind.id_prefix in WRAPPABLE_KINDS and is_module_path(path)


@dataclass
class Candidate:
    """One target path over ``runs`` runs: per-run time (chosen domain) and calls, totals of the rest;
    its operator mix is of ``mix_runs`` runs (a capture's operator runs, else the same runs)."""

    path: str
    runs: int
    mix_runs: int
    times: list[float] = field(init=False)
    calls: list[int] = field(init=False)
    region_time: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # by region id merged in
    parent_time: dict[str | None, float] = field(default_factory=lambda: defaultdict(float))  # by parent path
    method: str | None = None
    forward_runs: bool = False  # a region of its module's own forward was seen (not only an entry method's)
    cpu_us: float = 0.0  # host time of its whole subtree, over all runs
    device_us: float = 0.0
    mix: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # subtree CPU µs by category
    mix_cpu_us: float = 0.0  # host time of its subtree over the runs the mix is of: what the mix is part of
    operators: int = 0
    has_mix: bool = False
    module_type: str | None = None
    shapes: int = 0  # distinct input-shape signatures (0: not recorded)
    examples: list[dict[str, list[int]]] = field(default_factory=list)
    stateful_io: bool = False  # its calls take or return an object with state (a key-value cache)
    call_structure_us: float = 0.0  # host µs a tuned wrapper pays per call for its arguments' and output's structure
    outside_root: bool = False  # ran outside the root module's forward: tuning the root whole leaves it eager
    run_mixes: dict[str, RunMix] = field(default_factory=dict)  # the mix of each run it is of, apart
    above: frozenset[str] = frozenset()  # every target path it ran inside (`ancestors`), set once all are gathered

    def __post_init__(self) -> None:
        self.times, self.calls = [0.0] * self.runs, [0] * self.runs

    @property
    def region_id(self) -> str:
        """The id of the region merged in that took the most time."""
        return max(self.region_time, key=self.region_time.__getitem__)

    @property
    def parent(self) -> str | None:
        """The target path it ran under for most of its time; None at the top (or under a root entry method)."""
        return max(self.parent_time, key=self.parent_time.__getitem__) if self.parent_time else None

    def ancestors(self, candidates: Mapping[str, Candidate]) -> frozenset[str]:
        """Every target path it ran inside, in any run: a nested target, whatever its path says."""
        found: set[str] = set()
        waiting = [parent for parent in self.parent_time if parent is not None]
        while waiting:
            path = waiting.pop()
            if path not in found and path in candidates:
                found.add(path)
                waiting += [parent for parent in candidates[path].parent_time if parent is not None]
        return frozenset(found)

    @property
    def median_us(self) -> float:
        return statistics.median(self.times)

    @property
    def operator_us(self) -> float:
        return sum(self.mix.values())

    def kind_share(self, kinds: Iterable[str]) -> float:
        """Fraction of its host time in operators of ``kinds``."""
        return sum(self.mix.get(kind, 0.0) for kind in kinds) / self.mix_cpu_us if self.mix_cpu_us > 0 else 0.0


@dataclass
class RunMix:
    """One run's operator mix of a candidate: CPU µs by category, its subtree's host time, its operator count."""

    categories: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    cpu_us: float = 0.0
    count: int = 0


@dataclass
class Found:
    """Everything gathered: the candidates, each parent's children, and the root entry methods' own time."""

    candidates: dict[str, Candidate]
    children: dict[str, list[Candidate]]
    root_methods: dict[str, list[float]]  # name → its own time in each run (chosen domain)
    root_has_children: bool
    marks_methods: bool = False  # the profile marks entry methods (ours do, and nest a forward a method calls)
    run_us: float = 0.0  # median run time in the chosen domain

    def outside(self, candidate: Candidate) -> list[Candidate]:
        """The targets under ``candidate``'s path that never ran inside it (topmost ones): Whisper's
        ``model.encoder``, which ``generate`` calls through ``model.get_encoder()`` and never through
        ``model``'s forward. A wrapper on ``candidate`` would not cover them."""
        prefix = candidate.path + "."
        return [
            other
            for other in self.candidates.values()
            if other.path.startswith(prefix)
            and not any(up == candidate.path or up.startswith(prefix) for up in other.above)
        ]


@dataclass
class _Mix:
    """A subtree's operators: CPU µs by category and count; ``seen`` when any node carried them."""

    categories: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    count: int = 0
    seen: bool = False

    def add(self, other: _Mix) -> None:
        for kind, us in other.categories.items():
            self.categories[kind] += us
        self.count += other.count
        self.seen = self.seen or other.seen


def gather(doc: ProfileLike, domain: str) -> Found:
    """Walk every run's tree (or flat regions) once, adding each node to its target path's candidate.

    ``doc`` is read as its typed record."""
    record = as_profile(doc)
    regions = RegionIndex(record)
    runs, mix_runs = len(record.runs), len(record.traced_runs())
    run_us = statistics.median(time_in(run.timing, domain) or 0.0 for run in record.runs)
    found = Found({}, defaultdict(list), {}, False, regions.marked, run_us)
    run_key = ""  # the run being walked, for `Candidate.run_mixes`

    def visit(node: TreeNode | RegionShare, index: int | None, parent: str | None) -> _Mix:
        """Add ``node`` to its candidate; ``index`` None: an operator run's node, whose operator mix alone counts."""
        path, method = regions.module_path(node.region_id)
        subtree = _Mix()
        if node.operators is not UNSET:
            subtree.add(_Mix(defaultdict(float, node.operators.categories), node.operators.count, True))
        children = node.children if isinstance(node, TreeNode) else ()
        if path and not wrappable(record, node.region_id):  # an annotation: advice, not a target
            for child in children:
                subtree.add(visit(child, index, parent))
            return subtree
        if not path:  # the root object's entry method: the modules under it are the top-level targets
            if index is not None:
                own = self_time_in(node, domain) if isinstance(node, TreeNode) else None  # flat: no self time
                own = (time_in(node, domain) or 0.0) if own is None else own
                found.root_methods.setdefault(path_of(node.region_id), [0.0] * runs)[index] += own
                found.root_has_children = found.root_has_children or bool(children)
            for child in children:
                visit(child, index, None)
            return subtree
        candidate = found.candidates.get(path)
        if candidate is None and index is not None:
            candidate = found.candidates.setdefault(path, Candidate(path, runs, mix_runs))
        if candidate is not None and index is not None:
            candidate.forward_runs = candidate.forward_runs or method is None
        if path == parent or candidate is None:  # vae's forward inside vae.decode: the method's target holds it
            for child in children:
                subtree.add(visit(child, index, path))
            return subtree
        if index is not None:
            _add_timing(candidate, node, index, parent, method, domain)
        for child in children:
            subtree.add(visit(child, index, path))
        for kind, us in subtree.categories.items():
            candidate.mix[kind] += us
        if subtree.seen:
            candidate.mix_cpu_us += node.cpu_time_us
            run_mix = candidate.run_mixes.setdefault(run_key, RunMix())
            for kind, us in subtree.categories.items():
                run_mix.categories[kind] += us
            run_mix.cpu_us += node.cpu_time_us
            run_mix.count += subtree.count
        candidate.operators += subtree.count
        candidate.has_mix = candidate.has_mix or subtree.seen
        return subtree

    for index, run in enumerate(record.runs):
        run_key = f"runs[{index}]"
        for node in run.top_nodes():
            visit(node, index, None)
    # the measured runs were clock-timed: the mixes are these runs'
    for index, run in enumerate(given(record.operator_runs, [])):
        run_key = f"operator_runs[{index}]"
        for node in run.top_nodes():
            visit(node, None, None)
    for candidate in found.candidates.values():
        candidate.above = candidate.ancestors(found.candidates)
        _describe(candidate, regions.meta)
        if candidate.parent is not None:
            found.children[candidate.parent].append(candidate)
    found.children = dict(found.children)
    return found


def _add_timing(
    candidate: Candidate, node: TreeNode | RegionShare, index: int, parent: str | None, method: str | None, domain: str
) -> None:
    """One measured run's time and calls of ``node`` on its ``candidate``."""
    time = time_in(node, domain) or 0.0
    candidate.times[index] += time
    candidate.calls[index] += node.calls
    candidate.region_time[node.region_id] += time
    candidate.parent_time[parent] += time
    candidate.method = candidate.method or method
    candidate.cpu_us += node.cpu_time_us
    candidate.device_us += given(node.device_time_us, 0.0)


def _describe(candidate: Candidate, meta: Mapping[str, RegionMeta]) -> None:
    """Module type, input shapes, stateful I/O, the call's structure cost and whether it ran outside the root's
    forward, from the ``regions`` entries (``meta``, by id) of the region ids merged in (the largest structure
    cost of them)."""
    for region_id in candidate.region_time:
        region = meta.get(region_id)
        if region is None:
            continue
        candidate.module_type = candidate.module_type or given(region.module_type, None)
        candidate.stateful_io = candidate.stateful_io or region.stateful_io is True
        candidate.outside_root = candidate.outside_root or region.outside_root_forward is True
        candidate.call_structure_us = max(candidate.call_structure_us, given(region.call_structure_us, 0.0))
        shapes = region.input_shapes
        if shapes is not UNSET and shapes.distinct > candidate.shapes:
            candidate.shapes, candidate.examples = shapes.distinct, list(shapes.examples)


def number_within(value: Any, low: float, high: float) -> bool:
    """Whether ``value``, read from a document, is a finite number (not a bool) in ``[low, high]``."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return number and math.isfinite(value) and low <= value <= high
