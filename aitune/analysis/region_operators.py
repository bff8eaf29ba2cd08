"""Each region's operator mix: CPU time of the operators that ran directly inside it, by category.

"Directly inside" means the operator's innermost enclosing region span is the region's own (not a
child region's) and no other operator encloses it, so an ``aten::linear`` holding an ``aten::addmm``
counts once, with its whole duration, under the outer operator's name (``linear`` → ``matmul``).
Outermost names rather than inner kernels: they are what the user's module called, and the kernels
under one call (``addmm``, ``t``, ``view``) belong to the same piece of work.

A category's time is therefore part of the region's CPU self time; what the categories leave of
the self time is spent between operators (Python in ``forward``). Host synchronisations made by
the runtime outside any operator (``cudaStreamSynchronize`` from ``torch.cuda.synchronize()``)
count as ``sync``; they are not operators, so not in the count.

One start-sorted sweep per thread over its runs, region spans, operators and synchronising runtime
calls (`aitune.analysis.intervals.parents`) finds every span's immediate parent, which says all of it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from aitune.analysis.attribution import run_index_of
from aitune.analysis.events import ThreadKey, TraceEvents
from aitune.analysis.intervals import parents
from aitune.analysis.residual import operator_cause
from aitune.markers import REGION_SPAN_PREFIX

CATEGORIES = ("conv", "matmul", "attention", "elementwise_norm", "copy", "sync", "other")
"""Kinds of work, split where the project's tuning benchmarks measured different backend gains."""

_MATMUL = frozenset(
    {"linear", "addmm", "mm", "bmm", "baddbmm", "addbmm", "matmul", "addmv", "mv", "dot", "einsum", "_addmm_activation"}
)
_ELEMENTWISE_NORM = frozenset(
    {
        # normalisations and softmax
        "layer_norm", "native_layer_norm", "group_norm", "native_group_norm", "batch_norm", "native_batch_norm",
        "_batch_norm_impl_index", "instance_norm", "rms_norm", "_fused_rms_norm", "softmax", "_softmax",
        "log_softmax", "_log_softmax",
        # activations
        "relu", "gelu", "silu", "sigmoid", "tanh", "hardtanh", "hardswish", "hardsigmoid", "leaky_relu", "elu",
        "mish", "erf", "dropout", "threshold",
        # arithmetic and reductions a fusing compiler folds into its neighbours
        "add", "sub", "rsub", "mul", "div", "pow", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "reciprocal",
        "clamp", "clamp_min", "clamp_max", "maximum", "minimum", "where", "masked_fill", "round", "floor",
        "mean", "sum", "var", "std", "upsample_nearest2d", "upsample_bilinear2d", "triu", "tril",
    }
)


@dataclass
class OperatorMix:
    """CPU µs by category of the operators directly inside one region, in one run; ``count`` of them."""

    count: int = 0
    categories: dict[str, float] = field(default_factory=dict)

    def add(self, category: str, duration_us: float, operator: bool = True) -> None:
        self.categories[category] = self.categories.get(category, 0.0) + duration_us
        self.count += operator

    def to_dict(self) -> dict[str, Any]:
        """``{"count": n, "categories": {category: cpu µs}}``, categories in `CATEGORIES` order, empty ones left out."""
        ordered = {name: self.categories[name] for name in CATEGORIES if name in self.categories}
        return {"count": self.count, "categories": ordered}


NodeKey = tuple[int, tuple[str, ...]]
"""(run index, region ids from the topmost region down to the node): a node of a run's region tree."""


@cache
def operator_category(name: str) -> str:
    """The category of an operator (or runtime call) by its name, e.g. ``aten::conv2d`` → ``conv``."""
    cause = operator_cause(name)
    if cause != "tensor_ops":
        return "sync" if cause == "synchronization" else "copy"
    base = name.removeprefix("aten::")
    if "conv" in base:
        return "conv"
    if "attention" in base or "multi_head" in base or "_transformer_encoder_layer" in base:
        return "attention"
    base = base.removesuffix("_") if base.endswith("_") and not base.startswith("_") else base  # add_ → add
    if base in _MATMUL:
        return "matmul"
    if base in _ELEMENTWISE_NORM:
        return "elementwise_norm"
    return "other"


def region_operator_mixes(events: TraceEvents) -> dict[NodeKey, OperatorMix]:
    """The operator mix of every region-tree node of every measured run (nodes without operators left out)."""
    mixes: dict[NodeKey, OperatorMix] = defaultdict(OperatorMix)
    by_thread = events.op_indices_by_thread
    for thread in dict.fromkeys([*(span.thread for span in events.regions), *by_thread]):
        _fold_thread(events, thread, by_thread.get(thread, []), mixes)
    return dict(mixes)


def _fold_thread(events: TraceEvents, thread: ThreadKey, op_indices: Sequence[int], mixes: dict[NodeKey, Any]) -> None:
    runs = [span for span in events.runs if span.thread == thread]
    regions = [span for span in events.regions if span.thread == thread]
    if not runs or not regions:
        return
    syncs = [c for c in events.launches if c.thread == thread and operator_category(c.name) == "sync"]
    ops = events.ops
    # One column list: runs, then regions, then operators, then runtime calls; on equal start and
    # length a stable sort keeps that order, so a region comes out as the parent of an operator.
    starts = [s.start_us for s in runs] + [s.start_us for s in regions] + [ops.starts_us[i] for i in op_indices]
    durations = [s.duration_us for s in runs] + [s.duration_us for s in regions]
    durations += [ops.durations_us[i] for i in op_indices]
    starts += [call.start_us for call in syncs]
    durations += [call.duration_us for call in syncs]
    parent_of = parents((starts, durations))

    first_region, first_op = len(runs), len(runs) + len(regions)
    first_call = first_op + len(op_indices)
    keys: dict[int, NodeKey | None] = {}

    def node_key(index: int) -> NodeKey | None:
        """The tree node of region span ``index``: its run and the region ids above it (memoised)."""
        if index in keys:
            return keys[index]
        parent = parent_of[index]
        while parent is not None and parent >= first_op:  # a region opened inside an operator: look past it
            parent = parent_of[parent]
        region = regions[index - first_region].name[len(REGION_SPAN_PREFIX) :]
        if parent is None:
            key = None
        elif parent < first_region:
            key = (run_index_of(runs[parent]), (region,))
        else:
            above = node_key(parent)
            key = None if above is None else (above[0], (*above[1], region))
        keys[index] = key
        return key

    for index in range(first_op, len(starts)):
        parent = parent_of[index]
        if parent is None or not first_region <= parent < first_op:
            continue  # outside every region (the residual's), or inside another operator
        key = node_key(parent)
        if key is None:
            continue
        if index < first_call:
            mixes[key].add(operator_category(ops.names[op_indices[index - first_op]]), durations[index])
        else:
            mixes[key].add("sync", durations[index], operator=False)
