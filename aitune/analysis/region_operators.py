"""Each region's operator mix: CPU time of the operators that ran directly inside it, by category.

"Directly inside" means the operator's innermost enclosing region span is the region's own (not a
child region's) and no other operator encloses it, so an ``aten::linear`` holding an ``aten::addmm``
counts once, with its whole duration, under the outer operator's name (``linear`` → ``matmul``).
Outermost names rather than inner kernels: they are what the user's module called, and the kernels
under one call (``addmm``, ``t``, ``view``) belong to the same piece of work.

A category's time is therefore part of the region's CPU self time; what the categories leave of
the self time is spent between operators (Python in ``forward``). Host synchronisations made by
the runtime outside any operator (``cudaStreamSynchronize`` from ``torch.cuda.synchronize()``)
count as ``sync``; they are not operators, so not in the count. ``communication`` holds the calls of
torch.distributed's operators (``c10d::allreduce_``, …): the time they took on the calling thread,
not the transfer's time in flight, which is the region's ``communication`` (`aitune.analysis.communication`).

Per thread: the topmost operators are read from the model's nesting, and the region-tree node each of
them started in from its membership columns (`aitune.analysis.membership`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np

from aitune.analysis.events import ThreadView, TraceEvents
from aitune.analysis.intervals import Columns
from aitune.analysis.membership import NodeKey, node_keys, nodes_at
from aitune.analysis.residual import operator_cause

CATEGORIES = (
    "conv",
    "matmul",
    "attention",
    "recurrent",
    "elementwise_norm",
    "copy",
    "sync",
    "communication",
    "other",
)
"""Kinds of work, split where the project's tuning benchmarks measured different backend gains."""
_CATEGORY_INDEX = {category: index for index, category in enumerate(CATEGORIES)}

_RECURRENT = frozenset(
    {"gru", "lstm", "rnn_tanh", "rnn_relu", "gru_cell", "lstm_cell", "rnn_tanh_cell", "rnn_relu_cell"}
)
"""Recurrent layers: one operator that runs a loop of matmuls and gates over the time steps inside it."""
_MATMUL = frozenset(
    {"linear", "addmm", "mm", "bmm", "baddbmm", "addbmm", "matmul", "addmv", "mv", "dot", "einsum", "_addmm_activation"}
)
_ELEMENTWISE_NORM = frozenset(
    {
        # normalisations and softmax
        "layer_norm",
        "native_layer_norm",
        "group_norm",
        "native_group_norm",
        "batch_norm",
        "native_batch_norm",
        "_batch_norm_impl_index",
        "instance_norm",
        "rms_norm",
        "_fused_rms_norm",
        "softmax",
        "_softmax",
        "log_softmax",
        "_log_softmax",
        # activations
        "relu",
        "gelu",
        "silu",
        "sigmoid",
        "tanh",
        "hardtanh",
        "hardswish",
        "hardsigmoid",
        "leaky_relu",
        "elu",
        "mish",
        "erf",
        "dropout",
        "threshold",
        # arithmetic and reductions a fusing compiler folds into its neighbours
        "add",
        "sub",
        "rsub",
        "mul",
        "div",
        "pow",
        "neg",
        "abs",
        "exp",
        "log",
        "sqrt",
        "rsqrt",
        "reciprocal",
        "clamp",
        "clamp_min",
        "clamp_max",
        "maximum",
        "minimum",
        "where",
        "masked_fill",
        "round",
        "floor",
        "mean",
        "sum",
        "var",
        "std",
        "upsample_nearest2d",
        "upsample_bilinear2d",
        # pooling: windowed reductions, memory-bound as the reductions above
        "max_pool1d",
        "max_pool2d",
        "max_pool3d",
        "avg_pool1d",
        "avg_pool2d",
        "avg_pool3d",
        "adaptive_avg_pool1d",
        "adaptive_avg_pool2d",
        "adaptive_avg_pool3d",
        "adaptive_max_pool1d",
        "adaptive_max_pool2d",
        "triu",
        "tril",
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


@cache
def operator_category(name: str) -> str:
    """The category of an operator (or runtime call) by its name, e.g. ``aten::conv2d`` → ``conv``."""
    cause = operator_cause(name)
    if cause != "tensor_ops":
        return {"synchronization": "sync", "memory_copy": "copy"}.get(cause, cause)
    base = name.removeprefix("aten::")
    if "conv" in base:
        return "conv"
    if "attention" in base or "multi_head" in base or "_transformer_encoder_layer" in base:
        return "attention"
    base = base.removesuffix("_") if base.endswith("_") and not base.startswith("_") else base  # add_ → add
    if base in _RECURRENT:
        return "recurrent"
    if base in _MATMUL:
        return "matmul"
    if base in _ELEMENTWISE_NORM:
        return "elementwise_norm"
    return "other"


def region_operator_mixes(events: TraceEvents) -> dict[NodeKey, OperatorMix]:
    """The operator mix of every region-tree node of every measured run (nodes without operators left out).

    The sums are `numpy.bincount`s over (node, category) pairs, in start order: each node's category
    time adds its operators one by one, as a loop would, without a Python step per operator. The node
    each operator or call started in is the model's (`aitune.analysis.membership`).
    """
    mixes: dict[NodeKey, OperatorMix] = defaultdict(OperatorMix)
    keys = node_keys(events.runs, events.region_tree)
    category_of_code = np.array([_CATEGORY_INDEX[operator_category(name)] for name in events.ops.distinct_names] or [0])
    for view in events.threads.values():
        if not view.regions:
            continue
        top = _topmost_operators(view)
        syncs = [
            position
            for position, index in enumerate(view.launches)
            if operator_category(events.launches[index].name) == "sync"
        ]
        top_spans = (view.op_starts_us[top].tolist(), view.op_durations_us[top].tolist()) if syncs else ([], [])
        calls = [
            position for position in syncs if not _inside(top_spans, events.launches[view.launches[position]].start_us)
        ]
        durations = np.concatenate(
            (view.op_durations_us[top], [events.launches[view.launches[position]].duration_us for position in calls])
        )
        categories = np.concatenate(
            (category_of_code[events.ops.name_codes[view.ops[top]]], np.full(len(calls), _CATEGORY_INDEX["sync"]))
        )
        is_operator = np.arange(len(durations)) < len(top)
        owners = np.concatenate((view.op_regions[top], view.launch_regions[np.array(calls, dtype=np.intp)]))
        nodes = nodes_at(view.region_nodes, owners)
        counted = nodes >= 0  # outside every region (the residual's), or in a region outside every run: left out
        pairs = nodes[counted] * len(CATEGORIES) + categories[counted]
        width = len(keys) * len(CATEGORIES)
        times = np.bincount(pairs, weights=durations[counted], minlength=width).tolist()
        present = np.bincount(pairs, minlength=width)
        operators = np.bincount(pairs[is_operator[counted]], minlength=width).tolist()
        for pair in np.flatnonzero(present).tolist():
            node, index = divmod(pair, len(CATEGORIES))
            mix = mixes[keys[node]]
            mix.categories[CATEGORIES[index]] = mix.categories.get(CATEGORIES[index], 0.0) + times[pair]
            mix.count += operators[pair]
    return dict(mixes)


def _topmost_operators(view: ThreadView) -> np.ndarray:
    """The positions in ``view`` of its operators that no other operator encloses, in start order."""
    return view.op_order[view.op_parents[view.op_order] < 0]


def _inside(ops: Columns, point_us: float) -> bool:
    """True when ``point_us`` falls inside one of the disjoint, start-ordered spans ``ops``."""
    starts, durations = ops
    index = bisect_right(starts, point_us) - 1
    return index >= 0 and point_us < starts[index] + durations[index]
