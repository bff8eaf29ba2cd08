"""``aitune.torch.profile``: discover regions, capture, and derive the profile document from the trace."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from torch import nn

import aitune
from aitune.errors import CaptureError
from aitune.markers import region_path
from aitune.report import (
    ProfileDoc,
    build_profile,
    combine_scenarios,
    profile_from_events,
    read_trace_file_events,
    render_markdown,
    save,
)
from aitune.report.document import FULL_MODE, LITE_MODE
from aitune.report.trace_writes import wait_for_traces
from aitune.torch.model_state import KeptState
from aitune.torch.peaks import ensure_peaks
from aitune.torch.performance.capture import (
    ALL_RUNS,
    capture_trace,
    check_run_counts,
    profiler_activities,
    resolve_operator_runs,
)
from aitune.torch.performance.distributed import rank_path, rank_session
from aitune.torch.performance.environment import profile_environment
from aitune.torch.performance.inputs import input_summary, normalize_input
from aitune.torch.performance.regions import DEFAULT_MAX_DEPTH, RegionTarget, discover_targets, qualified_type
from aitune.torch.registry import MODULE_REGISTRY, ModuleRegistry


class PerformanceProfile:
    """A captured profile: ``data`` is the JSON-ready document, ``trace_file`` the Chrome trace if kept.

    The trace is written in the background after the capture returns (`wait_for_trace`); reading
    ``trace_file`` waits for it, so the path it gives always names a complete file.
    """

    def __init__(self, data: ProfileDoc, trace_file: Path | None = None) -> None:
        self.data = data
        self._trace_file = trace_file

    @property
    def trace_file(self) -> Path | None:
        """The Chrome trace's path once it is completely written; None when no trace was kept."""
        return self.wait_for_trace()

    def wait_for_trace(self) -> Path | None:
        """Block until the Chrome trace is written (`OutputError` if it could not be); its path, or None."""
        if self._trace_file is not None:
            wait_for_traces(self._trace_file)
        return self._trace_file

    def markdown(self) -> str:
        """The deterministic Markdown view of ``data``."""
        return render_markdown(self.data)

    def save(self, path: str | Path) -> Path:
        """Write ``data`` as indented JSON (validated, never NaN/Infinity); returns the path.

        A rank's profile of a distributed capture goes into ``rank<r>/`` beside ``path``
        (``profile.json`` → ``rank1/profile.json``), as its trace did, so ranks never overwrite each other.
        """
        distributed = self.data.get("distributed")
        return save(self.data, rank_path(path, distributed["rank"]) if distributed else path)


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


@dataclass(frozen=True)
class Scenario:
    """One named input of a multi-scenario profile, e.g. ``Scenario("batch 8", {"x": torch.randn(8, 16)})``."""

    name: str
    input_data: Any = None


def profile(
    obj: Any,
    input_data: Any = None,
    inference_function: Any = None,
    warmup_runs: int = 3,
    measured_runs: int = 10,
    trace_file: str | Path | None = None,
    *,
    max_depth: int = DEFAULT_MAX_DEPTH,
    registry: ModuleRegistry | None = None,
    record_shapes: bool = False,
    with_stack: bool = False,
    obj_name: str | None = None,
    mode: str = FULL_MODE,
    operator_runs: int | str | None = None,
    on_warmed_up: Callable[[int], None] | None = None,
) -> PerformanceProfile:
    """Profile ``inference_function(input)`` (or ``obj(input)``) and attribute its time to regions of ``obj``.

    ``input_data`` follows AITune: a mapping is passed as keyword arguments, a tuple as positional
    arguments, None as none, anything else as one argument. A list of `Scenario` profiles each
    input in turn; the document then holds one section per scenario under ``scenarios`` (the first
    one also at the top level, so single-input readers still work), and each scenario gets its own
    trace file (``trace.json`` → ``trace.<name>.json``). ``max_depth=1`` gives AITune's flat regions.
    ``obj_name``, the name ``obj`` has in the user's code (``pipe``), is recorded as ``target.root``:
    region paths start from it, and compare strips it from a script-mode capture's ``pipe.unet``.
    ``mode="lite"`` times regions and runs without the profiler: no operator table, no residual
    causes, no operator mixes, and about the plain run time (the document's ``profiler.mode``).
    ``operator_runs`` says where a full capture traces operators: ``"all"``, in every measured run;
    a count n, in n runs of their own after the measured runs, which are then timed like a lite
    capture's, so the profiler's cost per operator never reaches the timing (the document's
    ``operator_runs``). None picks `DEFAULT_OPERATOR_RUNS` on the CPU, and ``"all"`` with CUDA or
    in a torch.distributed process group, where device times and communication come from the
    profiler's events (a count is refused there).
    A full capture records the operators' input shapes wherever it traces operators in runs of their own
    (and in every run with CUDA), whatever ``record_shapes`` says, and measures this machine's roofs once
    (`aitune.torch.peaks`, cached): each region's work and efficiency (docs/efficiency.md).
    ``on_warmed_up(n)`` is called once the user warmups of a capture are done with ``n``, the number
    of calls the whole capture makes, warmups included, e.g. to size a progress bar; and again with
    the new total whenever a measured run still warming up is set aside (see `capture_trace`).

    The measured runs decide whether the warmups were enough (on the CPU: a run still falling is set
    aside as a warmup), and the Chrome trace is written in the background after this returns, whole or
    not at all: `PerformanceProfile.trace_file`, `PerformanceProfile.wait_for_trace` and
    `aitune.torch.wait_for_traces` wait for it (docs/attribution.md, step 3).

    Under torch.distributed (torchrun's ``RANK``/``WORLD_SIZE``, or an initialised group of more than
    one rank) every rank must call this at the same point: the document gains a ``distributed`` block,
    each run its ``barrier_wait_us``, and the trace file goes into ``rank<r>/`` beside ``trace_file``
    (see `aitune.torch.performance.distributed`; a group aitune had to create is destroyed on return).

    Example::

        prof = aitune.torch.profile(obj=pipe, input_data={"prompt": "a cat"}, inference_function=infer,
                                    warmup_runs=3, measured_runs=10, trace_file="trace.json")
        prof.save("profile.json")
    """
    check_run_counts(warmup_runs, measured_runs)
    if not isinstance(max_depth, int) or max_depth < 1:
        raise CaptureError(f"max_depth must be an integer of at least 1 (got {max_depth!r}); 1 gives flat regions.")
    _check_mode(mode, record_shapes, with_stack, operator_runs)
    function = inference_function if inference_function is not None else obj
    if not callable(function):
        raise CaptureError(
            f"nothing to call: {qualified_type(function)} is not callable; "
            "pass inference_function=... or a callable obj."
        )
    targets = discover_targets(obj, registry if registry is not None else MODULE_REGISTRY, max_depth)
    metadata = {
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "aitune_version": aitune.__version__,
        "config": {
            "warmup_runs": warmup_runs,
            "measured_runs": measured_runs,
            "uses_inference_function": inference_function is not None,
            "max_depth": max_depth,
            "record_shapes": record_shapes,
            "with_stack": with_stack,
            "mode": mode,
        },
        "target": {"type": qualified_type(obj), **({"root": obj_name} if obj_name else {})},
        "profiler": (
            {"mode": LITE_MODE, "activities": []}
            if mode == LITE_MODE
            else {"mode": FULL_MODE, "activities": [activity.name for activity in profiler_activities()]}
        ),
        "regions": region_metadata(targets),
        "environment": profile_environment(),
    }
    if mode != LITE_MODE:  # the roofs the regions' work is placed against (measured once per machine, cached)
        metadata["environment"]["machine_peaks"] = ensure_peaks()
    options = {
        "warmup_runs": warmup_runs,
        "measured_runs": measured_runs,
        "record_shapes": record_shapes,
        "with_stack": with_stack,
        "on_warmed_up": on_warmed_up,
    }
    scenarios = _scenarios(input_data)
    with rank_session() as session:
        traced = 0 if mode == LITE_MODE else resolve_operator_runs(operator_runs)
        metadata["config"]["operator_runs"] = ALL_RUNS if traced is None else traced
        options["operator_runs"] = traced
        if session is not None:
            metadata["distributed"] = session.info
            options["session"] = session
            trace_file = rank_path(trace_file, session.rank) if trace_file is not None else None
        options["kept"] = state_roots(obj, targets)
        return _collected(_profile_inputs(function, input_data, scenarios, targets, metadata, trace_file, options))


def state_roots(obj: Any, targets: list[RegionTarget]) -> list[tuple[str, nn.Module]]:
    """The modules whose buffers a capture keeps (`KeptState`): ``obj`` when it is a module, else every target's."""
    return [("", obj)] if isinstance(obj, nn.Module) else [(target.path, target.module) for target in targets]


def _profile_inputs(
    function: Any,
    input_data: Any,
    scenarios: list[Scenario] | None,
    targets: list[RegionTarget],
    metadata: dict[str, Any],
    trace_file: str | Path | None,
    options: dict[str, Any],
) -> PerformanceProfile:
    if scenarios is None:
        kept = Path(trace_file) if trace_file is not None else None
        doc = _profile_one(function, input_data, targets, metadata, kept, options)
        return PerformanceProfile(data=doc, trace_file=kept.resolve() if kept is not None else None)
    traces = [_scenario_trace(trace_file, scenario.name) for scenario in scenarios]
    docs = [
        _profile_one(function, scenario.input_data, targets, metadata, trace, options)
        for scenario, trace in zip(scenarios, traces, strict=True)
    ]
    doc = combine_scenarios([scenario.name for scenario in scenarios], docs)
    return PerformanceProfile(data=doc, trace_file=traces[0].resolve() if traces[0] is not None else None)


def _check_mode(mode: str, record_shapes: bool, with_stack: bool, operator_runs: int | str | None) -> None:
    if mode not in (FULL_MODE, LITE_MODE):
        raise CaptureError(f"mode must be {FULL_MODE!r} or {LITE_MODE!r} (got {mode!r}).")
    if mode == LITE_MODE and (record_shapes or with_stack or operator_runs is not None):
        raise CaptureError(
            "record_shapes, with_stack and operator_runs are profiler options and a lite capture runs no profiler; "
            "drop them or use mode='full'."
        )


def _collected(result: PerformanceProfile) -> PerformanceProfile:
    made = _COLLECTED.get()
    if made is not None:
        made.append(result)
    return result


def _profile_one(
    function: Any,
    input_data: Any,
    targets: list[RegionTarget],
    metadata: dict[str, Any],
    trace_path: Path | None,
    options: dict[str, Any],
) -> ProfileDoc:
    args, kwargs = normalize_input(input_data)
    if trace_path is not None:
        _check_writable(trace_path)
    capture_options = {key: value for key, value in options.items() if key != "kept"}
    with KeptState(options["kept"]) as kept:  # a model in training mode changes its buffers on every call
        events = capture_trace(
            lambda: function(*args, **kwargs),
            targets,
            metadata={**metadata, "input": input_summary(args, kwargs)},
            trace_path=trace_path,
            **capture_options,
        )
    doc = profile_from_events(events)
    doc["warnings"] = [*doc.get("warnings", ()), *kept.warnings()]
    if trace_path is not None:
        doc["trace_file"] = trace_path.name
    return doc


def _scenarios(input_data: Any) -> list[Scenario] | None:
    """The scenarios of a multi-scenario input, or None for one input; names must be unique."""
    if not (isinstance(input_data, list) and input_data and all(isinstance(s, Scenario) for s in input_data)):
        return None
    names = [scenario.name for scenario in input_data]
    if len(set(names)) != len(names) or not all(names):
        raise CaptureError(f"scenario names must be unique and non-empty (got {names}); rename the scenarios.")
    return input_data


def _scenario_trace(trace_file: str | Path | None, name: str) -> Path | None:
    if trace_file is None:
        return None
    path = Path(trace_file)
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-") or "scenario"
    suffixes = "".join(path.suffixes)
    return path.with_name(f"{path.name.removesuffix(suffixes)}.{slug}{suffixes}")


def analyze_trace(path: str | Path) -> PerformanceProfile:
    """Re-derive the profile from a saved Chrome trace (plain or gzipped); no capture runs.

    The trace may come from an aitune capture, NVIDIA AITune 0.6, or the user's own torch.profiler
    session with a schedule (runs from its ``ProfilerStep#N`` spans, regions from its
    ``record_function`` annotations and, with ``with_stack=True``, its module calls).
    """
    source = Path(path)
    doc = build_profile(read_trace_file_events(source), str(source))
    doc["trace_file"] = source.name
    return PerformanceProfile(data=doc, trace_file=source.resolve())


def region_metadata(targets: list[RegionTarget]) -> list[dict[str, Any]]:
    """The ``regions`` entries of every instrumented region; an entry-method region names its ``method``."""
    regions: list[dict[str, Any]] = []
    for target in targets:
        if target.hook_forward:
            regions.append(_meta(target.region, target))
        regions += [{**_meta(target.method_region(method), target), "method": method} for method in target.methods]
    return regions


def _meta(region: str, target: RegionTarget) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "id": region,
        "name": region_path(region),
        "kind": target.kind,
        "module_type": target.module_type,
    }
    if target.wrapper_state is not None:
        meta["wrapper_state"] = target.wrapper_state
    if target.parent is not None and region == target.region:
        meta["parent"] = target.parent
    return meta


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
