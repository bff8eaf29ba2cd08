"""Write the hostile plan corpus into ``plans/`` beside this script: plan.json files a stranger could share.

Run ``python tests/hostile/make_plan_corpus.py`` from the repository root to regenerate it. Every case
is one change to a valid base plan: the loop app's ``encoder.body.0`` (a Conv2d) recorded on its real
input and given the cheap ``autocast`` backend, so `GOOD` applies and each other file differs from it
in the one way its name says. The plan's graph is made by the wrapper itself, so the corpus follows
the saved form when it changes (the test that compares the files to this script says when).
"""

from __future__ import annotations

import copy
import gzip
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PLANS = HERE / "plans"
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent / "apps")]

import loop_app  # noqa: E402

import aitune.torch as ait  # noqa: E402
from aitune.report import dumps  # noqa: E402
from aitune.torch.tuning.paths import unwrap  # noqa: E402
from aitune.torch.tuning.plan_write import TunedRegion, make_plan  # noqa: E402

PATH = "encoder.body.0"
GOOD = "good.plan.json"

Plan = dict[str, Any]


def base_plan() -> Plan:
    """The valid plan every case changes: fixed dates and versions, so the files are the same each time."""
    pipe = loop_app.build()
    wrapper = ait.wrap(pipe, [PATH])[PATH]
    try:
        pipe(loop_app.x)
        saved = wrapper.to_dict()
    finally:
        unwrap(pipe, [PATH])
    saved["state"] = "tuned"
    saved["tuned_backends"] = {
        graph["graph_id"]: {"name": "autocast", "config": {"dtype": "bfloat16"}} for graph in saved["graphs"]
    }
    plan = make_plan("loop_app.Pipeline", [TunedRegion(PATH, "aot", wrapper.module, saved, None)], {})
    return {**plan, "created_at": "2026-01-01T00:00:00+00:00", "aitune_version": "0.1.0", "environment": {}}


def _region(plan: Plan) -> Plan:
    return plan["regions"][0]


def _graph(plan: Plan) -> Plan:
    return _region(plan)["wrapper"]["graphs"][0]


def _backend(plan: Plan) -> Plan:
    return next(iter(_region(plan)["wrapper"]["tuned_backends"].values()))


def _set(get: Callable[[Plan], Plan], key: str, value: Any) -> Callable[[Plan], None]:
    def change(plan: Plan) -> None:
        get(plan)[key] = value

    return change


def _top(key: str, value: Any) -> Callable[[Plan], None]:
    return _set(lambda plan: plan, key, value)


def _structure_text(old: str, new: str) -> Callable[[Plan], None]:
    """Replace text inside the graph's structure, in whichever form the wrapper writes it."""

    def change(plan: Plan) -> None:
        import orjson

        structure = _graph(plan)["structure"]
        if isinstance(structure, str):
            _graph(plan)["structure"] = structure.replace(old, new)
        else:
            _graph(plan)["structure"] = orjson.loads(orjson.dumps(structure).replace(old.encode(), new.encode()))

    return change


def _second_region(path: str) -> Callable[[Plan], None]:
    def change(plan: Plan) -> None:
        plan["regions"].append({**copy.deepcopy(_region(plan)), "path": path})

    return change


def _with_backend(name: str, config: Any) -> Callable[[Plan], None]:
    def change(plan: Plan) -> None:
        _backend(plan).update(name=name, config=config)

    return change


def _both_shapes(shape: Any) -> Callable[[Plan], None]:
    def change(plan: Plan) -> None:
        _graph(plan)["min_shapes"] = [shape]
        _graph(plan)["max_shapes"] = [shape]

    return change


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


CASES: dict[str, Callable[[Plan], None]] = {
    # the plan's form
    "regions-a-string": _top("regions", "encoder"),
    "regions-of-strings": _top("regions", ["encoder.body.0"]),
    "region-not-an-object": _top("regions", [5]),
    "kind-missing": lambda plan: plan.pop("kind"),
    "schema-version-true": _top("schema_version", True),
    "schema-version-float": _top("schema_version", 1.0),
    "schema-version-string": _top("schema_version", "1"),
    "schema-version-newer": _top("schema_version", 2),
    "tolerance-negative": _top("tolerance", {"rtol": -1, "atol": None}),
    "environment-escape": _top("environment", {"torch": "\x1b[2J\x1b]0;pwned\x07"}),
    # paths
    "path-index-5000-digits": _set(_region, "path", "encoder.body." + "9" * 5000),
    "path-superscript-digit": _set(_region, "path", "encoder.body.²"),
    "path-dunder": _set(_region, "path", "__class__.__init__"),
    "path-empty-part": _set(_region, "path", "encoder..body"),
    "path-negative-index": _set(_region, "path", "encoder.body.-1"),
    "path-a-number": _set(_region, "path", 5),
    "path-twice": _second_region(PATH),
    "path-nested": _second_region("encoder"),
    "module-type-escape": _set(_region, "module_type", "\x1b[31mtorch.nn.Conv2d"),
    "mode-unknown": _set(_region, "mode", "eval"),
    # the saved wrapper
    "wrapper-a-string": _set(_region, "wrapper", "pickle"),
    "wrapper-type-unknown": _set(lambda plan: _region(plan)["wrapper"], "type", "torch.nn.Module"),
    "wrapper-name-slash": _set(lambda plan: _region(plan)["wrapper"], "name", "../etc"),
    "state-bogus": _set(lambda plan: _region(plan)["wrapper"], "state", "bogus"),
    "state-recording": _set(lambda plan: _region(plan)["wrapper"], "state", "recording"),
    "graphs-a-dict": _set(lambda plan: _region(plan)["wrapper"], "graphs", {"a": 1}),
    "graph-id-a-path": _set(_graph, "graph_id", "../../etc/x"),
    "backend-for-no-graph": lambda plan: _region(plan)["wrapper"]["tuned_backends"].update(
        {"0123456789ab": {"name": "autocast", "config": {"dtype": "bfloat16"}}}
    ),
    # structures
    "structure-not-json": _set(_graph, "structure", "{not json"),
    "structure-a-number": _set(_graph, "structure", 42),
    "structure-nested-100": _set(_graph, "structure", _nested(100)),
    "dtype-unknown": _structure_text("float32", "float33"),
    "dtype-a-torch-function": _structure_text("float32", "load"),
    # shapes
    "shape-negative": _both_shapes([2, 3, -16, 16]),
    "shape-wrong-rank": _both_shapes([2, 3, 16]),
    "shape-float": _both_shapes([2, 3, 16.5, 16]),
    "shape-a-string": _both_shapes("2x3x16x16"),
    "shapes-one-too-many": lambda plan: _graph(plan).update(
        min_shapes=[[2, 3, 16, 16], [1]], max_shapes=[[2, 3, 16, 16], [1]]
    ),
    "shape-min-over-max": lambda plan: _graph(plan).update(min_shapes=[[4, 3, 16, 16]]),
    "shape-min-other-rank": lambda plan: _graph(plan).update(min_shapes=[[2, 3, 16]]),
    "shape-huge-1x3x2000x2000": _both_shapes([1, 3, 2000, 2000]),
    "shape-huge-dimension": _both_shapes([1, 3, 16, 10**12]),
    "shape-huge-product": _both_shapes([4194304, 4194304, 4194304, 4194304]),
    # backends
    "backend-unknown": _with_backend("pickle", {}),
    "backend-config-a-string": _with_backend("autocast", "bfloat16"),
    "backend-config-unknown-key": _with_backend("autocast", {"dtype": "bfloat16", "module": "os"}),
    "backend-config-wrong-type": _with_backend("onnxruntime", {"intra_op_threads": "4"}),
    "autocast-dtype-unknown": _with_backend("autocast", {"dtype": "float8"}),
    "inductor-mode-unknown": _with_backend("inductor", {"mode": "turbo", "freezing": True, "dynamic": None}),
    "tensorrt-workspace-huge": _with_backend("tensorrt", {"fp16": False, "workspace_gib": 10**9}),
    "threads-2000": _with_backend("onnxruntime", {"intra_op_threads": 2000}),
    "threads-negative": _with_backend("onnxruntime", {"intra_op_threads": -1}),
    "threads-over-cpus": _with_backend("onnxruntime", {"intra_op_threads": 1024}),
    # precision: a level this aitune knows, a reduced backend only in a plan made at its level, a bounded verdict
    "precision-unknown": _top("precision", "fp8"),
    "precision-a-list": _top("precision", ["bf16"]),
    "region-precision-unknown": _set(_region, "precision", "fp8"),
    "int8-backend-in-fp32-plan": _with_backend("int8_dynamic", {}),
    "bf16-config-unknown-key": _with_backend("bf16", {"compile": True, "dtype": "float16"}),
    "task-gate-metric-unknown": _top("task_gate", {"precision": "int8", "metric": "accuracy", "minimum": 0.9}),
    "task-gate-value-huge": _top("task_gate", {"metric": "psnr_db", "minimum": 30, "value": 1e300}),
    "task-gate-regions-huge": _top("task_gate", {"precision": "bf16", "metric": "cosine", "regions": ["a"] * 300}),
}
"""Case name → the one change to the base plan; each must be refused in one sentence, changing nothing."""

RAW_CASES = {
    "not-json": b"{not json\n",
    "empty": b"",
    "not-an-object": b"[1, 2]\n",
    "nan-speedup": None,  # the base plan with a NaN literal: not JSON
    "gzip-bomb": gzip.compress(b" " * (16 * 2**20 + 1), mtime=0),
}
"""Case name → bytes that are no plan at all (None: made from the base plan)."""


def corpus() -> dict[str, bytes]:
    """File name (under ``plans/``) → bytes of the valid base plan and of every case."""
    base = base_plan()
    files = {GOOD: dumps(base)}
    for name, change in CASES.items():
        plan = copy.deepcopy(base)
        change(plan)
        files[f"{name}.plan.json"] = dumps(plan)
    for name, data in RAW_CASES.items():
        files[f"{name}.plan.json"] = (
            data if data is not None else files[GOOD].replace(b'"speedup_vs_eager": null', b'"speedup_vs_eager": NaN')
        )
    return files


def main() -> None:
    PLANS.mkdir(exist_ok=True)
    for name, data in corpus().items():
        (PLANS / name).write_bytes(data)


if __name__ == "__main__":
    main()
