"""Script-mode capture (``aitune-profile capture app.py -- args``): run a script as ``__main__``, as Python would.

A script that imports aitune profiles itself: every profile it makes is collected. Any other script
is captured whole, as one run: global module hooks open a region span for each outermost module
call, and a module's path comes from the ownership tree of the objects holding it (``pipe.unet``),
searched from the script's outermost frame inwards when the module is first called.

Under torch.distributed a whole script is one rank's run: the script makes its own process group, so
nothing can align the ranks before it starts (its run has no ``barrier_wait_us``); once it has
finished, the ranks meet once to fill the ``distributed`` block (the script's group if it left one up,
else a short-lived one of aitune's) and the trace gets the ``distributedInfo`` torch did not write.
"""

from __future__ import annotations

import ast
import json
import runpy
import sys
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import torch
from torch import nn
from torch.autograd.profiler import record_function
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.profiler import ProfilerActivity

import aitune
from aitune.analysis.warnings import warning
from aitune.errors import CaptureError, UserCodeError
from aitune.markers import (
    COMPILED_REGION_KIND,
    TRACE_METADATA_KEY,
    UNTUNED_REGION_KIND,
    parse_region_id,
    region_id,
    region_path,
    region_span_name,
    run_span_name,
)
from aitune.report import profile_from_events
from aitune.torch.performance.capture import export_trace, profiler_activities, without_cycle_warning
from aitune.torch.performance.distributed import RankSession, is_distributed, stopped_by_sigterm, trace_distributed_info
from aitune.torch.performance.environment import profile_environment
from aitune.torch.performance.kineto import events_from_profiler
from aitune.torch.performance.profile import PerformanceProfile, collecting_profiles
from aitune.torch.performance.regions import is_compiled, qualified_type
from aitune.torch.performance.usercode import importable_from, script_argv, user_code_error

SINGLE_RUN_SCRIPT_CAPTURE = "SINGLE_RUN_SCRIPT_CAPTURE"
_LIBRARY_FILES = (str(Path(torch.__file__).parent), str(Path(aitune.__file__).parent), str(Path(runpy.__file__)))


@dataclass(frozen=True)
class ScriptCapture:
    """The profiles of one script run: the script's own, or the single whole-script profile."""

    profiles: list[PerformanceProfile]
    whole_script: bool


def capture_script(path: Path, args: Sequence[str] = (), *, trace_file: Path | None = None) -> ScriptCapture:
    """Run ``path`` with ``args`` as ``__main__``; `UserCodeError` when it raises or exits non-zero."""
    if not path.is_file():
        raise CaptureError(f"{path}: no such file; check the path.")
    if imports_aitune(path):
        with collecting_profiles() as made:
            run_script(path, args)
        return ScriptCapture(made, whole_script=False)
    return ScriptCapture([_capture_whole(path, args, trace_file)], whole_script=True)


def imports_aitune(path: Path) -> bool:
    """Whether the script imports aitune itself (then it makes its own profiles)."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except SyntaxError:
        return False  # running it reports the error where the user expects it
    for node in ast.walk(tree):
        names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        if any(name == "aitune" or name.startswith("aitune.") for name in names):
            return True
    return False


def run_script(path: Path, args: Sequence[str]) -> None:
    """``python path args...`` in this process; a zero or missing exit status is success."""
    with importable_from(path.parent), script_argv(path, args):
        try:
            runpy.run_path(str(path), run_name="__main__")
        except SystemExit as exit_request:
            if exit_request.code not in (None, 0):
                raise UserCodeError(f"{path} exited with status {exit_request.code}") from None
        except Exception as error:
            raise user_code_error(f"{path} raised {type(error).__name__}", error) from error


class OutermostModuleSpans:
    """Global forward hooks: one region span per outermost module call, on every thread; removed on exit."""

    def __init__(self) -> None:
        self._known: dict[int, tuple[nn.Module, str]] = {}
        self._paths: set[str] = set()
        self._threads = threading.local()
        self._handles: list[Any] = []

    def __enter__(self) -> OutermostModuleSpans:
        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        # torch warns that global hooks fire once more around a compiled module; these count depth,
        # so that call opens no second span, and the warning would only puzzle the script's user.
        warnings.filterwarnings("ignore", message=r"Using `torch\.compile\(module\)` when there are global hooks")
        self._handles.append(register_module_forward_pre_hook(self._enter))
        self._handles.append(register_module_forward_hook(self._leave, always_call=True))
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in reversed(self._handles):
            handle.remove()
        self._handles.clear()
        self._close_span()
        self._warnings.__exit__(*exc)

    def regions(self) -> list[dict[str, Any]]:
        """The ``regions`` metadata of every module that opened a span, in first-call order."""
        return [
            {
                "id": region,
                "name": region_path(region),
                "kind": parse_region_id(region)[0].document_kind,
                "module_type": qualified_type(m._orig_mod if is_compiled(m) else m),
            }
            for m, region in self._known.values()
        ]

    def _enter(self, module: nn.Module, _args: Any) -> None:
        depth = getattr(self._threads, "depth", 0)
        if depth == 0:
            self._threads.span = record_function(region_span_name(self._region_of(module)))
            self._threads.span.__enter__()
        self._threads.depth = depth + 1

    def _leave(self, _module: nn.Module, _args: Any, _output: Any) -> None:
        depth = getattr(self._threads, "depth", 0)
        if depth == 0:  # the module was entered before the hooks were installed
            return
        self._threads.depth = depth - 1
        if depth == 1:
            self._close_span()

    def _close_span(self) -> None:
        span = getattr(self._threads, "span", None)
        self._threads.span, self._threads.depth = None, 0
        if span is not None:
            span.__exit__(None, None, None)

    def _region_of(self, module: nn.Module) -> str:
        known = self._known.get(id(module))
        if known is not None and known[0] is module:
            return known[1]
        path = owner_path(module, script_frames(sys._getframe(2))) or type(module).__name__
        unique, number = path, 1
        while unique in self._paths:  # another module already owns this path (e.g. two anonymous Linear)
            number += 1
            unique = f"{path}#{number}"
        self._paths.add(unique)
        region = region_id(COMPILED_REGION_KIND if is_compiled(module) else UNTUNED_REGION_KIND, unique)
        self._known[id(module)] = (module, region)  # the module is kept alive so its id is never reused
        return region


def script_frames(frame: FrameType | None) -> list[FrameType]:
    """The user's frames from ``frame`` outwards up to `run_script`, outermost first (no torch, runpy, aitune)."""
    frames = []
    while frame is not None and frame.f_code is not run_script.__code__:
        if not frame.f_code.co_filename.startswith(_LIBRARY_FILES):
            frames.append(frame)
        frame = frame.f_back
    return frames[::-1]


def owner_path(module: nn.Module, frames: Sequence[FrameType]) -> str | None:
    """The dotted path of ``module`` from the first name (outermost frame first) whose object tree holds it."""
    for frame in frames:
        for name, value in list(frame.f_locals.items()):
            if name.startswith("__"):
                continue
            # A method's `self` is named after its class: `Pipeline.unet` says more than `self.unet`.
            root = type(value).__name__ if name == "self" else name
            for path, candidate in owned_modules(root, value):
                if candidate is module:
                    return path
    return None


def owned_modules(name: str, value: Any) -> Iterator[tuple[str, nn.Module]]:
    """Modules reachable from a named object: a module's subtree, or a pipeline's module attributes' subtrees."""
    if isinstance(value, nn.Module):
        yield from value.named_modules(prefix=name)
        return
    attributes = getattr(value, "__dict__", None)
    if not isinstance(attributes, dict) or isinstance(value, (type, ModuleType)):
        return
    for attribute, child in list(attributes.items()):
        if isinstance(child, nn.Module) and not attribute.startswith("_"):
            yield from child.named_modules(prefix=f"{name}.{attribute}")


def _capture_whole(path: Path, args: Sequence[str], trace_file: Path | None) -> PerformanceProfile:
    activities = profiler_activities()
    spans = OutermostModuleSpans()
    distributed = is_distributed()
    with (
        stopped_by_sigterm() if distributed else nullcontext(),
        without_cycle_warning(),
        torch.profiler.profile(activities=activities) as profiler,
    ):
        start = time.perf_counter_ns()
        with record_function(run_span_name(0)), spans:
            run_script(path, args)
            if ProfilerActivity.CUDA in activities:
                torch.cuda.synchronize()
        wall_us = (time.perf_counter_ns() - start) / 1000
        metadata = _metadata(path, args, spans.regions(), wall_us, activities)
        if distributed:
            with RankSession() as session:
                metadata["distributed"] = session.info
            profiler.add_metadata_json("distributedInfo", json.dumps(trace_distributed_info(session.info)))
        profiler.add_metadata_json(TRACE_METADATA_KEY, json.dumps(metadata))
    exported = export_trace(profiler, trace_file) if trace_file is not None else None
    doc = profile_from_events(events_from_profiler(profiler, metadata, exported))
    if trace_file is not None:
        doc["trace_file"] = trace_file.name
    return PerformanceProfile(data=doc, trace_file=trace_file.resolve() if trace_file is not None else None)


def _metadata(
    path: Path, args: Sequence[str], regions: list[dict[str, Any]], wall_us: float, activities: list[Any]
) -> dict[str, Any]:
    return {
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "aitune_version": aitune.__version__,
        "config": {"warmup_runs": 0, "measured_runs": 1, "capture_mode": "script", "script_args": len(args)},
        "target": {"type": "script", "script": path.name},
        "input": {"args_count": 0, "kwargs": [], "signature": []},
        "profiler": {"activities": [activity.name for activity in activities]},
        "regions": regions,
        "environment": profile_environment(),
        "warnings": [
            warning(
                SINGLE_RUN_SCRIPT_CAPTURE,
                f"{path.name} was captured whole as a single run (no warmup): times include first-call costs "
                "such as lazy initialisation; for steady-state numbers capture an entry function with "
                "`aitune-profile capture app.py:infer --warmup 3 --runs 10`.",
                source="capture",
            )
        ],
        "run_wall_times_us": [wall_us],
    }
