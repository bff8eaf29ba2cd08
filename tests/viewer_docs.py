"""Profile documents for the viewer tests, built through the real trace → document path."""

from __future__ import annotations

from typing import Any

from builders import op, region, run, trace

from aitune.report import ProfileDoc, build_profile

HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 1">'


def pipeline_doc(unet_us: float, runs: int = 4, extra_region: str | None = None, **meta: Any) -> ProfileDoc:
    """A 3-region pipeline: text_encoder (10 µs), unet (``unet_us``), vae.decode (20 µs) and 5 µs of glue per run."""
    events = []
    for index in range(runs):
        start = index * 1000.0
        spans = [
            ("untuned_module:text_encoder", 10.0),
            ("untuned_module:unet", unet_us),
            ("untuned_module:vae.decode", 20.0),
        ]
        if extra_region:
            spans.append((extra_region, 3.0))
        cursor = start + 5.0
        for region_id, duration in spans:
            events.append(region(region_id, cursor, cursor + duration))
            events.append(op("aten::conv2d", cursor + 1, cursor + duration - 1))
            cursor += duration
        events.append(run(index, start, cursor))
    return build_profile(trace(*events, config={"measured_runs": runs}, **meta))


def with_warning(doc: ProfileDoc, code: str, message: str = "a message") -> ProfileDoc:
    """``doc`` with one more warning."""
    return {**doc, "warnings": [*doc["warnings"], {"code": code, "message": message, "source": "test"}]}
