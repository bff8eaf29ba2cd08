"""The tests' profile documents, built the way a capture's are: a Chrome trace (`builders`) → `build_profile`.

One small vocabulary, so every document is valid by construction:

- ``runs``: one ``{region id: µs}`` per run, regions called one after the other; a region whose value
  is ``(µs, {child id: µs})`` holds its children, laid out from its own start (the rest is its self
  time); one whose value is a list ``[µs, µs, ...]`` is called once per item, back to back;
- ``residual_us``: each run's time outside every region (one figure, or one per run), spent first;
- ``operator``: the one operator each innermost region calls (filling it but 1 µs at each end);
- ``glue``: operators ``{name: µs}`` each run calls outside its regions, inside its residual;
- ``methods``: ``{region id: method}`` for entry methods, in the regions' metadata as captures write it;
- ``warnings``: codes carried from the capture; `scenarios` combines documents as a multi-input capture;
- ``layout``: for tests that need arbitrary spans, `laid_out` builds from a function giving each run's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Union

from builders import op, region, run, trace

from aitune.markers import parse_region_id
from aitune.report import ProfileDoc, build_profile, combine_scenarios

HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 1">'

Regions = Mapping[str, Union[float, list[float], "tuple[float, Regions]"]]
RUN_GAP_US = 1000.0  # idle time between runs: no run's events reach into the next


def profile(
    runs: Sequence[Regions],
    *,
    residual_us: float | Sequence[float] = 10.0,
    operator: str | None = None,
    glue: Mapping[str, float] | None = None,
    methods: Mapping[str, str] | None = None,
    warnings: Sequence[str] = (),
    **metadata: Any,
) -> ProfileDoc:
    """The document of a capture whose runs call ``runs``' regions (see the module's vocabulary)."""
    residuals = [residual_us] * len(runs) if isinstance(residual_us, (int, float)) else list(residual_us)
    assert sum((glue or {}).values()) <= min(residuals), "the glue operators run inside the residual"
    events, start = [], 0.0
    for index, (regions, residual) in enumerate(zip(runs, residuals, strict=True)):
        cursor = start
        for name, us in (glue or {}).items():
            events.append(op(name, cursor, cursor + us))
            cursor += us
        end = _lay_out(regions, start + residual, operator, events)
        events.append(run(index, start, end))
        start = end + RUN_GAP_US
    ids = sorted({rid for regions in runs for rid in _region_ids(regions)})
    return build_profile(
        trace(
            *events,
            config={"measured_runs": len(runs)},
            regions=[region_meta(rid, method=(methods or {}).get(rid)) for rid in ids],
            warnings=[{"code": code, "message": code.lower(), "source": "core"} for code in warnings],
            **metadata,
        )
    )


def region_meta(region_id: str, module_type: str | None = None, method: str | None = None, **extra: Any) -> dict:
    """A region's metadata as a capture records it: a managed (tuned) region's wrapper is ``tuned``."""
    kind, name = parse_region_id(region_id)
    entry = {"id": region_id, "name": name, "kind": kind.document_kind, **extra}
    if kind.managed:
        entry.setdefault("wrapper_state", "tuned")
    if module_type:
        entry["module_type"] = module_type
    if method:
        entry["method"] = method
    return entry


def scenarios(**docs: ProfileDoc) -> ProfileDoc:
    """One document for several named inputs, as a capture with ``--scenario`` writes it (the first is top-level)."""
    return combine_scenarios(list(docs), list(docs.values()))


def laid_out(
    layout: Callable[[float, int], list[dict[str, Any]]],
    runs: int = 3,
    run_us: float = 1000.0,
    tick_us: float = 1.0,
    **metadata: Any,
) -> ProfileDoc:
    """The document of ``runs`` runs of ``run_us`` ticks; ``layout(start, index)`` gives one run's spans in ticks
    of ``tick_us`` (so layouts read as short numbers)."""
    events = []
    for index in range(runs):
        start = index * 10 * run_us
        events += [run(index, start, start + run_us), *layout(start, index)]
    for event in events:
        event["ts"], event["dur"] = event["ts"] * tick_us, event["dur"] * tick_us
    return build_profile(trace(*events, **{**metadata, "regions": list(metadata.get("regions", ()))}))


def pipeline_doc(unet_us: float, runs: int = 4, extra_region: str | None = None, **meta: Any) -> ProfileDoc:
    """A 3-region pipeline: text_encoder (10 µs), unet (``unet_us``), vae.decode (20 µs) and 5 µs of glue per run,
    each region one ``aten::conv2d``."""
    regions = {"untuned_module:text_encoder": 10.0, "untuned_module:unet": unet_us, "untuned_module:vae.decode": 20.0}
    if extra_region:
        regions[extra_region] = 3.0
    return profile([regions] * runs, residual_us=5.0, operator="aten::conv2d", **meta)


def generate_doc(runs: int = 2, gap_us: float = 10.0) -> ProfileDoc:
    """A generate-like document: per run, ``untuned_module:model`` called on an 8-token prompt (800 µs), then
    three times on one token (100 µs each), ``gap_us`` after each call; phases prefill and decode."""
    durations = (800.0, 100.0, 100.0, 100.0)

    def calls(start: float, index: int) -> list[dict[str, Any]]:
        spans, at = [], start
        for us in durations:
            spans.append(region("untuned_module:model", at, at + us))
            at += us + gap_us
        return spans

    run_us = sum(durations) + len(durations) * gap_us
    meta = region_meta("untuned_module:model", call_lengths=[8, 1, 1, 1])
    return laid_out(calls, runs=runs, run_us=run_us, regions=[meta])


def worked_doc(runs: int = 2) -> ProfileDoc:
    """A document whose one region ``untuned_module:proj`` calls a traced ``aten::linear`` of known shapes
    (2·10·16·8 FLOPs) in each run, so it has ``work``, and the machine's peaks to place it under its roofs."""
    dims, types = [[2, 5, 16], [8, 16], [8]], ["float"] * 3
    events = []
    for index in range(runs):
        start = index * (100 + RUN_GAP_US)
        linear = op("aten::linear", start + 2, start + 80)
        linear["args"] = {"Input Dims": dims, "Input type": types, "Concrete Inputs": [""] * 3}
        events += [run(index, start, start + 100), region("untuned_module:proj", start + 1, start + 90), linear]
    doc = build_profile(trace(*events, config={"measured_runs": runs}))
    peaks = {"gemm_flops_per_s": {"float32": 1e11}, "copy_bytes_per_s": 1e10, "source": "test"}
    doc["environment"] = {"machine_peaks": {"cpu": peaks}}
    return doc


def with_warning(doc: ProfileDoc, code: str, message: str = "a message") -> ProfileDoc:
    """``doc`` with one more warning."""
    return {**doc, "warnings": [*doc["warnings"], {"code": code, "message": message, "source": "test"}]}


def _lay_out(regions: Regions, start: float, operator: str | None, events: list[dict[str, Any]]) -> float:
    """Append ``regions``' spans one after the other from ``start``; where the last one ends."""
    cursor = start
    for region_id, value in regions.items():
        for us, children in _calls(value):
            events.append(region(region_id, cursor, cursor + us))
            if children:
                _lay_out(children, cursor, operator, events)
            elif operator and us > 2:
                events.append(op(operator, cursor + 1, cursor + us - 1))
            cursor += us
    return cursor


def _calls(value: float | list[float] | tuple[float, Regions]) -> list[tuple[float, Regions]]:
    """A region's calls, each as (µs, children)."""
    if isinstance(value, tuple):
        return [value]
    return [(us, {}) for us in value] if isinstance(value, list) else [(value, {})]


def _region_ids(regions: Regions) -> list[str]:
    ids = []
    for region_id, value in regions.items():
        ids.append(region_id)
        if isinstance(value, tuple):
            ids += _region_ids(value[1])
    return ids


def tree_shape(nodes: Sequence[Mapping[str, Any]]) -> list[tuple[str, int, list]]:
    """A run's tree without its times: (region id, calls, children) at every node, to compare two captures."""
    return [(node["region_id"], node["calls"], tree_shape(node["children"])) for node in nodes]


def region_shares(run: Mapping[str, Any]) -> dict[str, float]:
    """A run's topmost regions and their CPU shares, in the document's order."""
    return {share["region_id"]: share["cpu_time_fraction"] for share in run["regions"]}
