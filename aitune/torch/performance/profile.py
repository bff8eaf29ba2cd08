"""``aitune.torch.profile``: discover regions, capture, and derive the profile document from the trace."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import aitune
from aitune.errors import CaptureError
from aitune.report import ProfileDoc, build_profile, read_trace, render_markdown, save
from aitune.torch.performance.capture import capture_trace, check_run_counts, profiler_activities
from aitune.torch.performance.environment import environment
from aitune.torch.performance.inputs import input_summary, normalize_input
from aitune.torch.performance.regions import RegionTarget, discover_targets, qualified_type
from aitune.torch.registry import MODULE_REGISTRY, ModuleRegistry


@dataclass
class PerformanceProfile:
    """A captured profile: ``data`` is the JSON-ready document, ``trace_file`` the Chrome trace if kept."""

    data: ProfileDoc
    trace_file: Path | None = None

    def markdown(self) -> str:
        """The deterministic Markdown view of ``data``."""
        return render_markdown(self.data)

    def save(self, path: str | Path) -> Path:
        """Write ``data`` as indented JSON (validated, never NaN/Infinity); returns the path."""
        return save(self.data, path)


_COLLECTED: ContextVar[list[PerformanceProfile] | None] = ContextVar("aitune_collected_profiles", default=None)


@contextmanager
def collecting_profiles() -> Iterator[list[PerformanceProfile]]:
    """Every profile `profile` makes inside the block is appended to the yielded list (the CLI's script mode)."""
    made: list[PerformanceProfile] = []
    token = _COLLECTED.set(made)
    try:
        yield made
    finally:
        _COLLECTED.reset(token)


def profile(
    obj: Any,
    input_data: Any = None,
    inference_function: Any = None,
    warmup_runs: int = 3,
    measured_runs: int = 10,
    trace_file: str | Path | None = None,
    *,
    registry: ModuleRegistry | None = None,
    record_shapes: bool = False,
    with_stack: bool = False,
) -> PerformanceProfile:
    """Profile ``inference_function(input)`` (or ``obj(input)``) and attribute its time to regions of ``obj``.

    Example::

        prof = aitune.torch.profile(obj=pipe, input_data={"prompt": "a cat"}, inference_function=infer,
                                    warmup_runs=3, measured_runs=10, trace_file="trace.json")
        prof.save("profile.json")
    """
    check_run_counts(warmup_runs, measured_runs)
    function = inference_function if inference_function is not None else obj
    if not callable(function):
        raise CaptureError(
            f"nothing to call: {qualified_type(function)} is not callable; pass inference_function=..."
            " or a callable obj."
        )
    args, kwargs = normalize_input(input_data)
    targets = discover_targets(obj, registry if registry is not None else MODULE_REGISTRY)
    metadata = {
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "aitune_version": aitune.__version__,
        "config": {
            "warmup_runs": warmup_runs,
            "measured_runs": measured_runs,
            "uses_inference_function": inference_function is not None,
            "record_shapes": record_shapes,
            "with_stack": with_stack,
        },
        "target": {"type": qualified_type(obj)},
        "input": input_summary(args, kwargs),
        "profiler": {"activities": [activity.name for activity in profiler_activities()]},
        "regions": region_metadata(targets),
        "environment": environment(),
    }
    kept = Path(trace_file) if trace_file is not None else None
    if kept is not None:
        _check_writable(kept)
    with tempfile.TemporaryDirectory(prefix="aitune-") as scratch:
        trace_path = kept if kept is not None else Path(scratch) / "trace.json"
        capture_trace(
            lambda: function(*args, **kwargs),
            targets,
            warmup_runs=warmup_runs,
            measured_runs=measured_runs,
            trace_path=trace_path,
            metadata=metadata,
            record_shapes=record_shapes,
            with_stack=with_stack,
        )
        doc = build_profile(read_trace(trace_path))
    if kept is not None:
        doc["trace_file"] = kept.name
    result = PerformanceProfile(data=doc, trace_file=kept.resolve() if kept is not None else None)
    collected = _COLLECTED.get()
    if collected is not None:
        collected.append(result)
    return result


def analyze_trace(path: str | Path) -> PerformanceProfile:
    """Re-derive the profile from a Chrome trace saved by a capture (plain or gzipped); no capture runs."""
    source = Path(path)
    doc = build_profile(read_trace(source))
    doc["trace_file"] = source.name
    return PerformanceProfile(data=doc, trace_file=source.resolve())


def region_metadata(targets: list[RegionTarget]) -> list[dict[str, Any]]:
    """The ``regions`` entries of every instrumented region, entry-method regions included."""
    regions: list[dict[str, Any]] = []
    for target in targets:
        meta: dict[str, Any] = {
            "id": target.region,
            "name": target.path,
            "kind": target.kind,
            "module_type": target.module_type,
        }
        if target.wrapper_state is not None:
            meta["wrapper_state"] = target.wrapper_state
        regions.append(meta)
        for method in target.methods:
            regions.append(
                {
                    "id": target.method_region(method),
                    "name": f"{target.path}.{method}",
                    "kind": target.kind,
                    "module_type": target.module_type,
                }
            )
    return regions


def _check_writable(path: Path) -> None:
    existed = path.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab"):
            pass
    except OSError as error:
        raise CaptureError(
            f"cannot write the Chrome trace to {path} ({error.strerror}); choose a writable trace_file."
        ) from None
    if not existed:
        path.unlink()
