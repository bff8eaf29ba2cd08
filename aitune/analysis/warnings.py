"""Warnings about the integrity of a capture, each with a stable UPPER_SNAKE code.

Every code has one row in the warning table of docs/profile-document.md; messages carry the measured
figures and the fix.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from aitune.markers import COMPILED_REGION_KIND, TRACE_KIND_AITUNE, parse_region_id


class ProfileWarning(TypedDict):
    code: str
    message: str
    source: str


def warning(code: str, message: str, source: str = "core") -> ProfileWarning:
    return ProfileWarning(code=code, message=message, source=source)


def unmapped_region_spans(count: int) -> list[ProfileWarning]:
    """Region spans outside every measured run (e.g. opened on another thread)."""
    if not count:
        return []
    return [
        warning(
            "UNMAPPED_REGION_EVENTS",
            f"{count} region span(s) ran outside every measured run's thread or time and are not attributed; "
            "this happens when modules run on worker threads.",
        )
    ]


def off_thread_region_calls(calls: int, threads: int) -> list[ProfileWarning]:
    """Calls of instrumented modules on threads other than the capturing one during the measured runs.

    They were not timed (regions are timed on the thread that runs the inference function), so no
    run holds them; the capturing thread's wait for them, if it waited, is its residual.
    """
    if not calls:
        return []
    return [
        warning(
            "OFF_THREAD_REGION_CALLS",
            f"{calls} call(s) of instrumented modules ran on {threads} thread(s) other than the one running the "
            "measured runs and are not attributed: regions are timed on the thread that runs the inference "
            "function, so a run's wait for worker threads is in its residual and a background thread's calls are "
            "in no run; call the modules on that thread to see them as regions.",
            source="capture",
        )
    ]


def run_count_mismatch(expected: int, found: int) -> list[ProfileWarning]:
    if expected == found:
        return []
    return [
        warning(
            "RUN_COUNT_MISMATCH",
            f"the trace holds {found} measured run(s) but the capture asked for {expected}; "
            "the profiler may have dropped events — rerun the capture.",
        )
    ]


def unregistered_regions(observed: Iterable[str], known: Mapping[str, Any]) -> list[ProfileWarning]:
    """Managed (AOT/JIT) regions seen in the trace that no registry entry described at capture time."""
    return [
        warning(
            "UNREGISTERED_AOT_REGION",
            f"region {region} was observed but its wrapper was not registered when the capture started; "
            "its state is reported as 'unknown'.",
        )
        for region in observed
        if region not in known and parse_region_id(region)[0].managed
    ]


def compiled_regions(observed: Iterable[str]) -> list[ProfileWarning]:
    """Modules the user compiled with ``torch.compile``: each is one region, with nothing inside it."""
    compiled = [region for region in observed if parse_region_id(region)[0].id_prefix == COMPILED_REGION_KIND]
    if not compiled:
        return []
    return [
        warning(
            "COMPILED_MODULE_NOT_WALKED",
            f"{', '.join(compiled)} ran compiled by torch.compile: each is one region with no regions inside it, "
            "since hooks inside a compiled graph are not seen and hooks on its submodules would break the graph; "
            "its operators are in the operator table, and a profile of the module before compiling shows its parts.",
            source="capture",
        )
    ]


def no_regions_observed(instrumented: int, runs: int, trace_kind: str = TRACE_KIND_AITUNE) -> list[ProfileWarning]:
    """No region ran: nothing was found to instrument, nothing instrumented ran, or another tool's trace has none."""
    if runs == 0:
        return []
    if trace_kind != TRACE_KIND_AITUNE:
        return [
            warning(
                "NO_REGIONS_IN_TRACE",
                f"this {trace_kind} trace holds no region spans, so all time is residual; wrap the parts to "
                'measure in torch.profiler.record_function("name"), record with with_stack=True for a region '
                "per module call, or capture with `aitune-profile capture`.",
                source="analysis",
            )
        ]
    if instrumented == 0:
        return [
            warning(
                "NO_REGIONS_DISCOVERED",
                "no nn.Module was found under the profiled object, so all time is residual; pass the model or "
                "pipeline as obj, and hold modules in attributes, nn.ModuleList or nn.ModuleDict.",
            )
        ]
    return [
        warning(
            "NO_REGIONS_OBSERVED",
            f"{instrumented} module region(s) were instrumented but none ran during the measured runs; "
            "check that the inference function calls the modules of obj.",
        )
    ]


def rank_straggler(
    rank: int, own_us: float, others_us: float, region: str | None, region_excess_us: float
) -> ProfileWarning:
    """One rank's steps take longer than the other ranks' beyond noise, outside communication (where the others
    wait for it); ``region`` is where the extra time goes (None: outside every region)."""
    where = "outside every region" if region is None else f"in {region}"
    return warning(
        "RANK_STRAGGLER",
        f"rank {rank} is slower than the other ranks beyond noise: outside communication its median step takes "
        f"{own_us / 1000:.3f} ms "
        f"vs {others_us / 1000:.3f} ms ({own_us / others_us - 1:+.0%}), most of it {where} "
        f"({region_excess_us / 1000:+.3f} ms at median); every rank waits for it at each step — look at "
        f"rank{rank}'s trace, balance the work between ranks, or check that rank's device and host.",
        source="merge",
    )


def training_mode(random: Iterable[str], changed: Mapping[str, Iterable[str]]) -> list[ProfileWarning]:
    """TRAINING_MODE: modules left in training mode that draw random numbers (Dropout-like, by path) or whose
    buffers changed during the capture (by path: the buffers' names); they were put back afterwards."""
    random, changed = sorted(random), {path: sorted(names) for path, names in sorted(changed.items())}
    if not random and not changed:
        return []
    parts = []
    if changed:
        buffers = "; ".join(f"{path or '(root)'}: {', '.join(names)}" for path, names in changed.items())
        parts.append(f"its runs changed the buffers of {buffers} (put back after the capture)")
    if random:
        parts.append(f"{', '.join(random)} {'draws' if len(random) == 1 else 'draw'} a random mask on every call")
    return [
        warning(
            "TRAINING_MODE",
            f"the model is in training mode: {' and '.join(parts)}; its times and outputs are a training step's, "
            "not inference's — call .eval() on the model before capturing or tuning.",
            source="capture",
        )
    ]
