"""Advice beyond modules: regions no wrapper can take, the root's entry methods, the residual by cause,
and the first call's cost.

The residual's figures are those of the measured runs, the runs the headline reads: where a
capture traced operators in runs of its own (`aitune.report.document.operator_runs`), those runs
only say how the residual splits by cause (median over them of each cause's part of their residual),
and the message says so. Every code has one row in the reason table of docs/commands.md, next to the targets' reasons.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from msgspec import UNSET, UnsetType

from aitune.analysis.shares import fraction
from aitune.report.formatting import factor, ms, percent
from aitune.report.headline import headline_rows
from aitune.report.model import CaptureOverhead, Profile, ProfileLike, as_profile
from aitune.report.samples import residual_causes
from aitune.suggest.candidates import Found, wrappable
from aitune.suggest.phase_advice import phase_advice

ADVICE_MIN_SHARE = 0.01
"""Residual causes and regions no wrapper can take below this share of the run are not worth a line."""
FIRST_CALL_MIN_RATIO = 1.5
"""A first call this many times slower than a warm one earns a line."""

RESIDUAL_ADVICE = {
    "synchronization": (
        "RESIDUAL_SYNC",
        "host reads of tensor values (.item(), .tolist(), nonzero) and synchronize calls outside every module take",
        "on a GPU each stalls the host until the device catches up; keep values on the device or read them once",
    ),
    "memory_copy": (
        "RESIDUAL_COPY",
        "tensor copies and device transfers outside every module take",
        "create tensors on their device, or move the inputs once",
    ),
    "communication": (
        "RESIDUAL_COMMUNICATION",
        "collectives and point-to-point transfers in flight outside every module take",
        "no module tuning touches them; issue them asynchronously beside compute, or move less data",
    ),
    "tensor_ops": (
        "RESIDUAL_TENSOR_OPS",
        "operators between modules (pipeline math, scheduler steps) take",
        "no module tuning touches them; move them into a module to tune them with it",
    ),
    "python": (
        "RESIDUAL_PYTHON",
        "Python between modules, with no operator running, takes",
        "framework glue that no backend removes",
    ),
}
"""Per residual cause (`aitune.analysis.residual.CAUSES`): the code, what it is (with its verb), what to do."""


@dataclass(frozen=True)
class Advice:
    """Something to do beyond tuning a module. ``time_per_run_us`` and ``share`` are of a median run,
    except for ``FIRST_CALL``: the first call's extra time (paid once) and its fraction of that call."""

    code: str
    message: str
    time_per_run_us: float
    share: float


def advice(doc: ProfileLike, found: Found, run_times: Sequence[float], domain: str = "cpu") -> list[Advice]:
    """Regions named by annotations, root entry methods, the residual's causes (largest first), the decode
    phase's findings (`aitune.suggest.phase_advice`), the first call.

    ``doc`` goes to the report's helpers as given (a record or its JSON form); the rest is read from the typed
    record."""
    record = as_profile(doc)
    lines = list(_annotations(doc, record, domain))
    lines += [_entry_method(name, own, run_times, found.root_has_children) for name, own in found.root_methods.items()]
    lines += sorted(_residual(doc, record), key=lambda item: -item.time_per_run_us)
    lines += [Advice(*finding) for finding in phase_advice(doc)]
    first = _first_call(record.capture_overhead)
    return lines + ([first] if first is not None else [])


def _entry_method(name: str, own: Sequence[float], run_times: Sequence[float], has_children: bool) -> Advice:
    time = statistics.median(own)
    share = statistics.median(fraction(o, r) for o, r in zip(own, run_times, strict=True))
    if has_children:
        message = (
            f"{name} is an entry method of the root object, so the targets are the modules it calls; its own code "
            f"outside them (sampling, concatenation, Python) takes {ms(time)} ms a run ({percent(share)}), "
            "counted in the residual and its causes."
        )
    else:
        message = (
            f"{name} is an entry method of the root object and the profile shows no module under it: capture "
            "with max_depth 2 or more to see the modules it runs."
        )
    return Advice("ENTRY_METHOD", message, time, share)


def _annotations(doc: ProfileLike, record: Profile, domain: str) -> Iterable[Advice]:
    """A line per headline region no wrapper can take (a plain torch.profiler trace's annotations), largest first."""
    rows = [
        row
        for row in headline_rows(doc, domain)
        if row.role == "region" and row.path and not wrappable(record, row.label) and row.share >= ADVICE_MIN_SHARE
    ]
    for row in sorted(rows, key=lambda row: -row.share):
        time = statistics.median(row.times_us)
        message = (
            f"{row.path} takes {ms(time)} ms a run ({percent(row.share)}), but its name is not a module path "
            "that aitune.torch.wrap or --targets can take (a plain torch.profiler trace names regions by "
            "annotations and module calls): capture the model with aitune-profile capture (or "
            "aitune.torch.profile) to get module paths to tune."
        )
        yield Advice("ANNOTATION_REGION", message, time, row.share)


def _residual(doc: ProfileLike, record: Profile) -> Iterable[Advice]:
    """One line per residual cause above `ADVICE_MIN_SHARE` (host time: the causes are measured on the CPU).

    Time and share are the measured runs' (medians, as the headline's); separate operator runs give each
    cause's part of the residual only.
    """
    measured = [run.residual for run in record.runs]
    time = statistics.median(residual.cpu_time_us for residual in measured)
    share = statistics.median(residual.cpu_time_fraction for residual in measured)
    traced = [run.residual for run in record.traced_runs()]
    if not all(residual.causes is not UNSET for residual in traced):
        if share >= ADVICE_MIN_SHARE:
            message = (
                f"{ms(time)} ms a run ({percent(share)}) run outside every module; this profile does not split "
                "it by cause (an aitune capture does: synchronisations, copies, operators, Python)."
            )
            yield Advice("RESIDUAL", message, time, share)
        return
    separate = record.operator_runs is not UNSET
    source = (
        f"; the residual of the {len(record.runs)} measured run(s), split by cause as the {len(traced)} run(s) "
        "that traced operators split theirs"
        if separate
        else ""
    )
    summary = residual_causes(doc)
    for cause, (code, what, fix) in RESIDUAL_ADVICE.items():
        if cause not in summary:
            continue  # communication: only in a trace that holds some
        if separate:
            cause_us, cause_share = summary[cause].of_residual * time, summary[cause].of_residual * share
        else:  # the measured runs traced their operators: their own medians
            cause_us, cause_share = summary[cause].time_us, summary[cause].share
        if cause_share >= ADVICE_MIN_SHARE:
            message = f"{what} {ms(cause_us)} ms a run ({percent(cause_share)}{source}): {fix}."
            yield Advice(code, message, cause_us, cause_share)


def _first_call(overhead: CaptureOverhead | UnsetType) -> Advice | None:
    """The cold first warmup against the warm ones (`aitune.analysis.statistics.capture_overhead`)."""
    if overhead is UNSET or overhead.first_wall_time_us is UNSET:
        return None
    first, warm = overhead.first_wall_time_us, overhead.plain_wall_time_us
    if warm <= 0 or first < FIRST_CALL_MIN_RATIO * warm:
        return None
    message = (
        f"the first call took {ms(first)} ms against {ms(warm)} ms warm ({factor(first / warm)}): "
        "lazy initialisation, allocations and kernel selection — warm up before serving; a tuned backend "
        "builds ahead of time but pays its own first call."
    )
    return Advice("FIRST_CALL", message, first - warm, (first - warm) / first)
