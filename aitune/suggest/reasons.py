"""Why a target is or is not recommended: stable codes, each with one sentence and its figures.

Every code has one row in the reason table of docs/commands.md. `BLOCKING` codes keep a target from being
recommended; the others say what favours it or what to watch for when tuning it.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from aitune.markers import parse_region_id
from aitune.report.efficiency import MOSTLY_UNCOUNTED
from aitune.report.formatting import factor, fine_factor, percent, whole_percent
from aitune.suggest.candidates import Candidate, Found
from aitune.suggest.gain import (
    COMPUTE_KINDS,
    HOST_BOUND_SHARE,
    KIND_NAMES,
    NO_MIX_SPEEDUP,
    Prediction,
    arithmetic_speedup,
    dominant_kind,
    upper_bound,
)
from aitune.suggest.headroom import Headroom

MIN_SHARE = 0.05
"""Below this share even an infinitely fast backend gains under 1.05×: within a shared machine's run-to-run noise."""
COMPUTE_HEAVY_SHARE = 0.5
FUSIBLE_SHARE = 0.2
DOMINANT_CHILD_SHARE = 0.9
UNSTABLE_SPREAD = 0.5
"""A share whose range over the runs exceeds this fraction of its median is too unsteady to predict from."""
MIN_REGION_SPEEDUP = 1.01
"""A region predicted less than 1% faster is mostly work a compiled graph keeps: not worth a build."""
LISTED_KIND_SHARE = 0.01
"""Compute kinds below this share of a region are left out of its sentence."""
STATEFUL_CALL = " (its calls carry an object with state, a key-value cache: dynamo's cost per call, not a graph's)"
"""Said after the per-call cost of a region marked ``stateful_io`` (`aitune.suggest.gain`)."""
MIN_SAID_STRUCTURE_US = 5.0
"""A call's structure cost (``call_structure_us``) below this is too small to name in the sentence."""

BLOCKING = frozenset(
    {
        "ALREADY_TUNED",
        "TOO_SMALL",
        "TUNE_PARENT",
        "DOMINANT_CHILD",
        "NO_MEASURED_GAIN",
        "METHOD_BYPASSES_FORWARD",
        "CHILD_OUTSIDE_FORWARD",
    }
)


@dataclass(frozen=True)
class Reason:
    code: str  # stable UPPER_SNAKE, documented in one table in docs/commands.md
    message: str  # one sentence with the numbers
    blocking: bool = False  # True: it keeps its target from being recommended


def reasons(
    candidate: Candidate, found: Found, shares: list[float], prediction: Prediction, domain: str
) -> tuple[Reason, ...]:
    """Every reason that applies: placement first, then what the operator mix says, then cautions."""
    found_reasons = [
        *_placement(candidate, found, statistics.median(shares)),
        *_mix(candidate, prediction, domain),
        *_cautions(candidate, shares),
    ]
    return tuple(Reason(code, message, code in BLOCKING) for code, message in found_reasons)


def _placement(candidate: Candidate, found: Found, share: float) -> Iterable[tuple[str, str]]:
    """Entry method, managed already, too small, better through its parent or through one child."""
    if candidate.method and found.marks_methods and not candidate.forward_runs:
        # diffusers' AutoencoderKL.decode calls its decoder, never its own forward: a wrapper there never runs.
        yield (
            "METHOD_BYPASSES_FORWARD",
            (
                f"{candidate.path}.{candidate.method} never calls {candidate.path}'s own forward, so a wrapper on "
                f"{candidate.path} would not run: tune the modules it calls."
            ),
        )
    elif outside := list(_outside_forward(candidate, found)):
        yield from outside
    elif candidate.method:
        yield (
            "ENTRY_METHOD",
            (
                f"{candidate.path}.{candidate.method} is an entry method: the target is its module "
                f"{candidate.path}, whose forward does the work."
            ),
        )
    for parent in _escaped_from(candidate, found):
        yield (
            "OUTSIDE_PARENT",
            (
                f"it runs outside {parent}'s forward (called through {parent}'s entry methods or directly), so a "
                f"wrapper on {parent} would not cover it: it is a target of its own."
            ),
        )
    kind = parse_region_id(candidate.region_id)[0]
    if kind.managed:
        yield (
            "ALREADY_TUNED",
            f"aitune already manages it (a {kind.id_prefix} region): tune something else, or re-tune it.",
        )
    if share < MIN_SHARE:
        yield (
            "TOO_SMALL",
            (
                f"it takes {percent(share)} of the run: even if it took no time the run would be only "
                f"{fine_factor(upper_bound(share))} faster."
            ),
        )
    parent = candidate.parent
    twins = [c for c in found.children.get(parent, []) if _alike(c, candidate)] if parent is not None else []
    if len(twins) >= 2:
        what = (candidate.module_type or "").rpartition(".")[2] or "indexed"
        yield (
            "TUNE_PARENT",
            (
                f"it is one of {len(twins)} identical {what} modules under {parent}: "
                f"one build of {parent} covers them all."
            ),
        )
    for child in found.children.get(candidate.path, []):
        problem = _spoiler(candidate, child)
        if problem and child.median_us >= DOMINANT_CHILD_SHARE * candidate.median_us > 0:
            yield (
                "DOMINANT_CHILD",
                (
                    f"its child {child.path} takes {whole_percent(child.median_us / candidate.median_us)} of its time "
                    f"without its {problem}: tune {child.path} instead."
                ),
            )
            break


def _outside_forward(candidate: Candidate, found: Found) -> Iterable[tuple[str, str]]:
    """Children that run outside the module's forward (handed out by an entry method, Whisper's
    ``get_encoder``): a wrapper on the module would not cover them, and would keep them from being wrapped."""
    escaped = found.outside(candidate)
    if not escaped or sum(child.median_us for child in escaped) < MIN_SHARE * found.run_us:
        return
    names = ", ".join(sorted(child.path for child in escaped))
    through = f" (handed out by {candidate.path}.{candidate.method})" if candidate.method else ""
    yield (
        "CHILD_OUTSIDE_FORWARD",
        (
            f"{names} run{'s' if len(escaped) == 1 else ''} outside {candidate.path}'s forward{through}: a wrapper "
            f"on {candidate.path} would not cover {'it' if len(escaped) == 1 else 'them'}, so the targets are "
            f"{names} and the modules {candidate.path}'s forward calls."
        ),
    )


def _escaped_from(candidate: Candidate, found: Found) -> Iterable[str]:
    """The targets above ``candidate``'s path whose forward it never ran inside (the innermost one)."""
    parts = candidate.path.split(".")
    for end in range(len(parts) - 1, 0, -1):
        parent = found.candidates.get(".".join(parts[:end]))
        if parent is not None:
            if candidate in found.outside(parent):
                yield parent.path
            return


def _alike(one: Candidate, other: Candidate) -> bool:
    """Identical siblings: one module type, or (types unknown) indexed entries of one container."""
    if one.module_type or other.module_type:
        return one.module_type == other.module_type
    prefix, _, index = one.path.rpartition(".")
    other_prefix, _, other_index = other.path.rpartition(".")
    return prefix == other_prefix and index.isdigit() and other_index.isdigit()


def _spoiler(candidate: Candidate, child: Candidate) -> str:
    """What the region holds outside ``child`` that would spoil a build of it ('' when nothing)."""
    if candidate.mix.get("sync", 0.0) > child.mix.get("sync", 0.0):
        return "host synchronisations"
    if candidate.shapes > 1 and child.shapes == 1:
        return "varying input shapes"
    return ""


def _mix(candidate: Candidate, prediction: Prediction, domain: str) -> Iterable[tuple[str, str]]:
    """What the gain model says (`aitune.suggest.gain`): no mix, no gain, dispatch-bound, compute-heavy, fusible."""
    if not candidate.has_mix:
        yield (
            "NO_OPERATOR_MIX",
            (
                "the profile holds no operator mix for it (lite captures, AITune's profiles, older captures; a full "
                "capture, or `aitune-profile analyze` of a full capture's trace, adds one): predicted with the "
                f"smallest gain measured on any module, {factor(NO_MIX_SPEEDUP)}."
            ),
        )
        return
    region_speedup, calibration = prediction.speedup, prediction.calibration
    call_us = f"{calibration.call_us(candidate.stateful_io):.0f} µs" + (STATEFUL_CALL if candidate.stateful_io else "")
    if candidate.call_structure_us >= MIN_SAID_STRUCTURE_US:
        call_us += f" + {candidate.call_structure_us:.0f} µs for its arguments' and output's structure"
    if region_speedup < MIN_REGION_SPEEDUP:
        kept = 1.0 - prediction.host_share
        yield (
            "NO_MEASURED_GAIN",
            (
                f"it is predicted only {fine_factor(region_speedup)} faster: {whole_percent(kept)} of its time is "
                f"work a compiled graph keeps (arithmetic, copies, host work beyond its {prediction.operators:.0f} "
                f"operators a run), and a call of one costs {call_us} ({calibration.source})."
            ),
        )
        return
    if prediction.host_share >= HOST_BOUND_SHARE:
        if domain == "device":
            what = f"the device is idle for {whole_percent(prediction.host_share)} of its time"
        else:
            what = (
                f"{whole_percent(prediction.host_share)} of its time is host overhead "
                f"({prediction.operators:.0f} operators a run and the Python between them)"
            )
        yield (
            "DISPATCH_BOUND",
            (
                f"{what}, which a compiled graph removes: predicted {factor(region_speedup)} for it, at "
                f"{calibration.op_us(candidate.stateful_io):.1f} µs an operator and {call_us} a call tuned "
                f"against {calibration.eager_op_us:.1f} µs an operator eager ({calibration.source})."
            ),
        )
        return
    compute = candidate.kind_share(COMPUTE_KINDS)
    if compute >= COMPUTE_HEAVY_SHARE:
        kinds = sorted(
            (k for k in COMPUTE_KINDS if candidate.kind_share((k,)) >= LISTED_KIND_SHARE),
            key=lambda k: -candidate.mix[k],
        )
        parts = ", ".join(f"{whole_percent(candidate.kind_share((k,)))} {KIND_NAMES[k]}" for k in kinds)
        measured = " and ".join(f"{KIND_NAMES[k]} {factor(calibration.speedup(k))}" for k in kinds)
        yield (
            "COMPUTE_HEAVY",
            (
                f"{whole_percent(compute)} of its time is compute ({parts}): predicted {factor(region_speedup)} "
                f"for it, its arithmetic at {measured} ({calibration.source})."
            ),
        )
    fusible = candidate.kind_share(("elementwise_norm",))
    if fusible >= FUSIBLE_SHARE:
        speedup = arithmetic_speedup("elementwise_norm", candidate, calibration)
        fused = f", counted at {factor(speedup)}" if dominant_kind(candidate) else ""
        yield (
            "FUSIBLE",
            (
                f"{whole_percent(fusible)} of its time is elementwise and normalisation operators, which a compiling "
                f"backend fuses into their neighbours{fused}."
            ),
        )


def _cautions(candidate: Candidate, shares: list[float]) -> Iterable[tuple[str, str]]:
    """What may spoil the build or the prediction: varying input shapes, host syncs, an unsteady share."""
    if candidate.shapes > 1:
        examples = "; ".join(
            ", ".join(f"{argument} {'×'.join(map(str, shape))}" for argument, shape in signature.items())
            for signature in candidate.examples[:2]
        )
        yield (
            "DYNAMIC_SHAPES",
            (
                f"its calls saw {candidate.shapes} distinct input shapes in the profiler warmup ({examples}, …): "
                "one static build will not fit them all — record it on inputs of every shape (the ONNX export then "
                "marks the varying dimensions dynamic) or pass dynamic_shapes."
            ),
        )
    sync_us = candidate.mix.get("sync", 0.0) / candidate.mix_runs
    if sync_us > 0:
        yield (
            "HOST_SYNC",
            (
                f"it reads tensor values on the host or synchronises ({sync_us:,.0f} µs a run in aten::item, nonzero "
                "or synchronize calls): each waits for the device and breaks graph capture — move them out of it."
            ),
        )
    share, low, high = statistics.median(shares), min(shares), max(shares)
    if share > 0 and (high - low > UNSTABLE_SPREAD * share or low == 0):
        yield (
            "UNSTABLE",
            (
                f"its share ranged {percent(low)}–{percent(high)} over {len(shares)} runs: the prediction is "
                "uncertain — capture more runs on a quieter machine."
            ),
        )


def headroom_reasons(headroom: Headroom | None) -> tuple[Reason, ...]:
    """What the roofline says of a target (`aitune.suggest.headroom`); none without work or peaks."""
    if headroom is None:
        return ()
    counted = f"{whole_percent(headroom.counted_share)} of its operator time is counted work"
    if headroom.counted_share < 1 - MOSTLY_UNCOUNTED:
        return (
            Reason(
                "MOSTLY_UNCOUNTED",
                f"only {counted} (matrix products, convolutions, attention): the rest has no formula, so its "
                "headroom is not known.",
            ),
        )
    roof = f"{headroom.bound or 'measured'} roof"
    where = f"{counted}, at {whole_percent(headroom.fraction_of_roof)} of this machine's {roof}"
    if headroom.near_roof:
        gain = f"a compiler gains little on it (at most {factor(headroom.arithmetic_cap)})"
        return (Reason("NEAR_ROOF", f"{where}: {gain}."),)
    return (Reason("HEADROOM", f"{where}: up to {factor(headroom.arithmetic_cap)} on that work, on paper."),)
