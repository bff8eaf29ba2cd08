"""The gain model: how much faster a compiled backend makes a region, from its operators and the machine's calibration.

A region's time per run splits in two (`predict`):

- **host overhead**, which a compiled backend (Inductor, ONNX Runtime) removes: the time between
  operators (Python in ``forward``, module calls, hooks) and each operator's fixed dispatch cost
  (``eager_op_us`` × operator count, plus the profiler's own cost per operator in the traced runs);
  (at most `MAX_HOST_PER_OP_US` per operator: beyond it the time is work of its own, kept);
- **arithmetic**, what the operators spend beyond dispatch, split by kind in proportion to each
  kind's operator time; a backend speeds it by its kind's figure (``arithmetic``; elementwise work
  in a region of convolutions by the convolution block's, `arithmetic_speedup`), copies,
  synchronisations, communication and other operators not at all.

The tuned region then costs ``calls × (tuned_call_us + call_structure_us) + operators × tuned_op_us +
Σ arithmetic / speedup`` (+ the work kept):
a compiled graph still pays a fixed cost per call and a smaller one per original operator (its
kernels, fewer once fused), and the wrapper takes each call's arguments apart and builds its output
again: ``call_structure_us``, timed by the capture on the region's own calls (a Hugging Face
``ModelOutput`` costs tens of µs, a tensor nothing). A region whose calls take or return an object
with state (a decode step's key-value cache: the capture marks it ``stateful_io``) pays
``stateful_call_us`` per call instead, and Inductor's cost per operator (`INDUCTOR_OP_SHARE` of eager
dispatch): ONNX Runtime cannot run it, and dynamo's guards over the object and its replay of the
object's mutations cost more than a graph call. The predicted region speedup is the region's time
÷ that, never below 1.

The figures come from a `Calibration`: measured on the device in use by ``aitune.torch.tuning.calibrate``
(a short run, cached per device, machine and torch version by ``aitune.torch.calibration``) and carried
in the profile's ``environment.gain_calibration``, so a profile read anywhere predicts the same; a profile without one
(a torch-free reader cannot calibrate) uses `FALLBACK`. Every figure is a median over the runs (the
operator mix is the median run's), so one slow run decides nothing on its own. A region without an
operator mix (lite captures, AITune's files) cannot be split: it gets `NO_MIX_SPEEDUP`.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec
from msgspec import UNSET

from aitune.report.formatting import factor
from aitune.report.model import GainCalibration, ProfileLike, as_profile, given
from aitune.suggest.candidates import Candidate, number_within
from aitune.suggest.headroom import Headroom, capped_speedup

COMPUTE_KINDS = ("conv", "matmul", "attention")
KIND_NAMES = {
    "conv": "convolution",
    "matmul": "matmul",
    "attention": "attention",
    "recurrent": "recurrent",
    "elementwise_norm": "elementwise",
}
ARITHMETIC_KINDS = (*COMPUTE_KINDS, "recurrent", "elementwise_norm")
"""Kinds whose arithmetic a backend speeds up; the others (copy, sync, communication, other) keep theirs.
A recurrent layer (GRU, LSTM) is one eager operator looping over its time steps with a dispatch per
gate: ONNX Runtime runs it as one fused kernel, so its figure is calibrated as the whole layer's."""
LEGACY_DEVICE = "cpu"
"""The device of a calibration that names none: one measured before calibrations were per device, on the CPU."""
MAX_DEVICE_CHARS = 200
FUSED_WITH_NEIGHBOURS = frozenset({"conv"})
"""Compute kinds calibrated together with the elementwise operators a backend fuses into them (a
convolution with its batch norm and ReLU): a region they dominate counts its elementwise work at their figure."""


@dataclass(frozen=True)
class Calibration:
    """What a compiled backend does to host overhead and arithmetic on one machine (µs, speedups ≥ 1)."""

    eager_op_us: float  # host µs an eager operator costs beyond its arithmetic (dispatch)
    tuned_op_us: float  # host µs per original operator inside a compiled graph
    tuned_call_us: float  # fixed host µs of one call of a compiled graph (guards, bindings, conversions)
    arithmetic: Mapping[str, float] = field(default_factory=dict)  # kind → speedup of its arithmetic
    source: str = "fallback"
    stateful_call_us: float = 0.0  # host µs of a tuned call carrying a cache object (0: `STATEFUL_CALL_US`)
    device: str = LEGACY_DEVICE  # measured on: ``cpu:<processor>`` or ``cuda:<device name>``

    def call_us(self, stateful: bool) -> float:
        """Fixed host µs of one tuned call: ``stateful_call_us`` for a call carrying an object with state."""
        return (self.stateful_call_us or STATEFUL_CALL_US) if stateful else self.tuned_call_us

    def op_us(self, inductor: bool) -> float:
        """Host µs per original operator of a tuned call: Inductor's (`INDUCTOR_OP_SHARE` of an eager operator's
        dispatch) for a call Inductor runs (one carrying an object with state, which only Inductor runs, or a
        region Inductor won), else ONNX Runtime's (``tuned_op_us``)."""
        return max(self.tuned_op_us, INDUCTOR_OP_SHARE * self.eager_op_us) if inductor else self.tuned_op_us

    def speedup(self, kind: str) -> float:
        return self.arithmetic.get(kind, 1.0) if kind in ARITHMETIC_KINDS else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "eager_op_us": self.eager_op_us,
            "tuned_op_us": self.tuned_op_us,
            "tuned_call_us": self.tuned_call_us,
            "arithmetic": dict(self.arithmetic),
            "source": self.source,
            **({"stateful_call_us": self.stateful_call_us} if self.stateful_call_us else {}),
            "device": self.device,
        }

    @classmethod
    def from_dict(cls, data: Any) -> Calibration | None:
        """The calibration ``data`` (a cached calibration's parsed JSON) describes, or None when it is not one
        (`from_record`). Read from files: nothing in it is trusted."""
        try:
            return cls.from_record(msgspec.convert(data, GainCalibration))
        except msgspec.ValidationError:
            return None

    @classmethod
    def from_record(cls, record: GainCalibration) -> Calibration | None:
        """The calibration ``record`` describes, or None when it is not one (a figure missing or out of its
        range): the caller then uses `FALLBACK`. One without ``stateful_call_us`` (measured before it was) uses
        `STATEFUL_CALL_US` for it; one without ``device`` was measured on the CPU (every calibration was, before
        the device was recorded)."""
        figures = [given(value, None) for value in (record.eager_op_us, record.tuned_op_us, record.tuned_call_us)]
        if not all(number_within(value, 0.0, MAX_HOST_US) for value in figures):
            return None
        arithmetic = given(record.arithmetic, {})
        if not all(
            kind in ARITHMETIC_KINDS and number_within(speedup, 1.0, MAX_ARITHMETIC_SPEEDUP)
            for kind, speedup in arithmetic.items()
        ):
            return None
        stateful = given(record.stateful_call_us, 0.0)
        if not number_within(stateful, 0.0, MAX_HOST_US):
            return None
        device = given(record.device, LEGACY_DEVICE)
        if not 0 < len(device) <= MAX_DEVICE_CHARS:
            return None
        return cls(
            *map(float, figures),
            {k: float(v) for k, v in arithmetic.items()},
            str(given(record.source, None))[:200] or "?",
            float(stateful),
            device,
        )

    @property
    def device_kind(self) -> str:
        """``cpu``, ``cuda``, …: the part of `device` before its name."""
        return self.device.partition(":")[0]


STATEFUL_CALL_US = 250.0
"""Host µs of dynamo's own work in one call that takes and returns a cache object (guards, argument
and output handling, the object's mutations replayed), where the calibration has no figure:
``aitune.torch.tuning.calibrate`` measured 160–370 µs (aitune's wrapper included) for a 12-layer decode
step carrying 24 cache tensors, on a 2-core x86 CPU at load 3–5 with torch 2.13 (about 100 µs with
one layer): the figure is the middle of that range. Docs: docs/gain-model.md."""
INDUCTOR_OP_SHARE = 0.6
"""Host cost of one original operator in a call Inductor runs, as a share of an eager operator's dispatch
(``eager_op_us``): only Inductor runs a call that carries an object with state, and its generated code
launches each kernel (fused elementwise work, each matmul) from Python, a few µs apiece, where an ONNX
Runtime graph costs a fraction of one (``tuned_op_us``). Measured on aitune's tuned decode calls of the
zoo's GPT-2, Whisper and T5 decoders (2.4–2.8, 1.9–3.5 and 1.7 µs an operator beyond the call's fixed
and structure costs and the arithmetic, against 3.9 µs an eager operator; torch 2.13 on a 2-core x86
CPU) and on a decode probe of 1–4 attention layers compiled by Inductor (1.1–3.1 µs): about 0.6 of eager
dispatch (the zoo's Mixtral-style MoE, which ONNX Runtime cannot run, compiled whole: 1.8× realised, where
ONNX Runtime's cost per operator predicted 3.3×). Docs: docs/gain-model.md."""
CAPTURE_DISPATCH_KEY = "capture_eager_op_us"
"""The ``environment`` key of the eager chain's µs per operator, timed between the capture's measured
runs (`aitune.torch.calibration.DispatchProbe`): the machine's speed then (`at_capture_speed`)."""
MAX_SPEED_FACTOR = 3.0
SAME_SPEED = 0.01
"""The capture's speed scales the calibration within ×3 either way; within 1% it is the same."""
MAX_HOST_US = 10_000.0
MAX_ARITHMETIC_SPEEDUP = 8.0
"""Bounds on a calibration read from a document: beyond them it is not a measurement of this kind."""

FALLBACK = Calibration(
    eager_op_us=6.0,
    tuned_op_us=1.0,
    tuned_call_us=50.0,
    arithmetic={"conv": 1.3, "matmul": 1.05, "attention": 1.3, "recurrent": 2.0, "elementwise_norm": 1.5},
    source="fallback table (no calibration in the profile)",
    stateful_call_us=STATEFUL_CALL_US,
)
"""Used when a profile carries no calibration. Figures of ``aitune.torch.tuning.calibrate`` on a 2-core x86
CPU with torch 2.13 and ONNX Runtime 1.23, rounded towards a smaller gain: an eager CPU operator costs
~6 µs of dispatch, an operator in an ONNX Runtime graph ~1 µs and a call of one through aitune's
wrapper ~50 µs; a graph
multiplies matmul arithmetic by ~1.05, convolutions and attention by ~1.3, and elementwise work it
fuses by ~1.5; ONNX Runtime runs a 64-wide GRU layer ~3.6× faster (measured with ONNX Runtime 1.32),
taken as 2. Docs: docs/gain-model.md."""

MAX_HOST_PER_OP_US = 60.0
"""Removable host overhead per operator at most: Python in a module's ``forward`` costs some µs per
operator; beyond this, the time between operators is work of its own (numpy, I/O, waits) that no graph captures."""
PROFILER_OP_US = 2.0
"""Host µs the profiler adds to each operator of a traced run (DESIGN.md: ~2 µs): dispatch, not arithmetic."""
NO_MIX_SPEEDUP = 1.07
"""A region without an operator mix: the smallest gain any module of this project's benchmarks made."""
DEVICE_ARITHMETIC_SPEEDUP = 1.0
"""Device kernels are not calibrated: a backend is credited only for the host time it removes."""
HOST_BOUND_SHARE = 0.5
"""A region whose removable host overhead is at least this share of its time is dispatch-bound."""
UPPER_BOUND_CAP = 1e6
"""Stands for an infinite speedup (a region covering the whole run): JSON has no infinity."""


@dataclass(frozen=True)
class Prediction:
    """One region's prediction, per run (µs, medians): its time, what a backend removes, what it keeps."""

    time_us: float  # the region's time in the chosen domain
    host_us: float  # removable host overhead: between operators and operator dispatch
    arithmetic_us: Mapping[str, float]  # by kind, before the backend's speedup
    tuned_us: float  # predicted time once tuned
    operators: float  # per run
    calls: float  # per run
    calibration: Calibration
    has_mix: bool = True  # False: the profile holds no operator mix for it (`NO_MIX_SPEEDUP`)

    @property
    def speedup(self) -> float:
        """The region's own predicted speedup, ≥ 1 and finite."""
        if self.tuned_us <= 0:
            return 1.0
        return min(UPPER_BOUND_CAP, max(1.0, self.time_us / self.tuned_us))

    @property
    def host_share(self) -> float:
        return self.host_us / self.time_us if self.time_us > 0 else 0.0


def calibration_of(profile: ProfileLike, *, on_device: bool) -> Calibration:
    """The calibration a profile carries (``environment.gain_calibration``) at the speed the machine had
    during the capture (`at_capture_speed`), when it was measured on the device the profile's runs used
    (`measured_on`: ``on_device`` says whether they had device time); else `FALLBACK`, whose source then
    says why (measured on another machine, it is not scaled)."""
    environment = as_profile(profile).environment
    if environment is UNSET or environment.gain_calibration is UNSET:
        return FALLBACK
    found = Calibration.from_record(environment.gain_calibration)
    if found is None:
        return FALLBACK
    if not measured_on(found, on_device, given(environment.devices, [])):
        ran_on = "a CUDA device" if on_device else "the CPU"
        why = f"the profile's calibration is of {found.device[:80]}, its runs of {ran_on}"
        return replace(FALLBACK, source=f"fallback table: {why}")
    return at_capture_speed(found, given(environment.capture_eager_op_us, None))


def measured_on(calibration: Calibration, on_device: bool, device_names: Sequence[str] = ()) -> bool:
    """Whether ``calibration`` was measured on the device a profile's runs used: a device's (of one of
    ``device_names``, where the profile names its devices) for runs with device time, the CPU's for runs
    without. A CPU calibration never prices a GPU's launches, nor a GPU's the CPU's dispatch."""
    if not on_device:
        return calibration.device_kind == "cpu"
    name = calibration.device.partition(":")[2]
    return calibration.device_kind != "cpu" and (not device_names or name in device_names)


def at_capture_speed(calibration: Calibration, capture_eager_op_us: Any) -> Calibration:
    """``calibration`` with its µs figures scaled by the capture's eager dispatch ÷ the calibration's.

    The calibration is measured once and cached; the capture's runs come minutes or days later, and a
    shared machine's speed drifts by tens of percent between the two. Timing the same eager chain
    between the measured runs (``capture_eager_op_us``) says how fast the machine was while the region
    times the prediction divides were taken; the arithmetic ratios stay as measured. A figure outside
    [1/`MAX_SPEED_FACTOR`, `MAX_SPEED_FACTOR`] of the calibration's is clamped there; none (an older
    profile, a lite capture) leaves the calibration as it is."""
    if not number_within(capture_eager_op_us, 0.01, MAX_HOST_US) or calibration.eager_op_us <= 0:
        return calibration
    scale = min(MAX_SPEED_FACTOR, max(1 / MAX_SPEED_FACTOR, capture_eager_op_us / calibration.eager_op_us))
    if abs(scale - 1) < SAME_SPEED:
        return calibration
    return replace(
        calibration,
        eager_op_us=calibration.eager_op_us * scale,
        tuned_op_us=calibration.tuned_op_us * scale,
        tuned_call_us=calibration.tuned_call_us * scale,
        stateful_call_us=(calibration.stateful_call_us or STATEFUL_CALL_US) * scale,
        source=f"{calibration.source}; µs figures scaled by {factor(scale)} for the machine's speed during the capture",
    )


def predict(
    candidate: Candidate,
    domain: str,
    calibration: Calibration = FALLBACK,
    headroom: Headroom | None = None,
    *,
    inductor: bool = False,
) -> Prediction:
    """The region's split into removable host overhead and arithmetic, and its tuned time (see the module docstring).

    ``headroom`` (`aitune.suggest.headroom`) caps the arithmetic speedup of the kinds the roofs bound; ``inductor``
    prices the tuned region as Inductor runs it (what ONNX Runtime could not run or lost, once tuned)."""
    time_us, calls = candidate.median_us, statistics.median(candidate.calls) if candidate.calls else 0.0
    if not candidate.has_mix:
        return Prediction(time_us, 0.0, {}, time_us / NO_MIX_SPEEDUP, 0.0, calls, calibration, has_mix=False)
    if candidate.mix_cpu_us <= 0 or time_us <= 0:
        return Prediction(time_us, 0.0, {}, time_us, 0.0, calls, calibration)
    mix, traced_us, operators = _typical_run(candidate)
    operator_us = sum(mix.values())
    dispatch_us = min(operator_us, operators * (calibration.eager_op_us + PROFILER_OP_US))
    beyond = (operator_us - dispatch_us) / operator_us if operator_us > 0 else 0.0
    host_time_us = candidate.cpu_us / candidate.runs if domain == "device" else time_us
    # The traced runs are slower than the clock-timed ones (the profiler): arithmetic is scaled to the
    # clock's time only where it would not fit, the rest of the difference is host overhead.
    scale = min(1.0, host_time_us / traced_us) if traced_us > 0 else 1.0
    arithmetic = {kind: us * beyond * scale for kind, us in mix.items() if us > 0}
    host_us = min(max(0.0, host_time_us - sum(arithmetic.values())), operators * MAX_HOST_PER_OP_US)
    other_us = max(0.0, host_time_us - sum(arithmetic.values()) - host_us)
    tuned_host = (
        calls * (calibration.call_us(candidate.stateful_io) + candidate.call_structure_us)
        + operators * calibration.op_us(candidate.stateful_io or inductor)
        + sum(us / arithmetic_speedup(kind, candidate, calibration, headroom) for kind, us in arithmetic.items())
        + other_us
    )
    if domain == "device":  # the region lasts max(host, busy); tuning shortens the host side only
        busy = candidate.device_us / candidate.runs
        before, after = max(host_time_us, busy), max(tuned_host, busy / DEVICE_ARITHMETIC_SPEEDUP)
        tuned = time_us * after / before if before > 0 else time_us
        idle_us = time_us * (1 - busy / before) if before > 0 else 0.0
        return Prediction(time_us, idle_us, arithmetic, tuned, operators, calls, calibration)
    return Prediction(time_us, host_us, arithmetic, tuned_host, operators, calls, calibration)


def _typical_run(candidate: Candidate) -> tuple[Mapping[str, float], float, float]:
    """(operator µs by category, subtree host µs, operator count) of the run whose subtree took the
    median time (the lower median: of two runs, the less disturbed), so that one preempted run
    decides nothing; the mean over the runs where the runs were not kept apart."""
    if not candidate.run_mixes:
        runs = max(1, candidate.mix_runs)
        return (
            {k: us / runs for k, us in candidate.mix.items()},
            candidate.mix_cpu_us / runs,
            candidate.operators / runs,
        )
    ordered = sorted(candidate.run_mixes.values(), key=lambda run: run.cpu_us)
    typical = ordered[(len(ordered) - 1) // 2]
    return typical.categories, typical.cpu_us, float(typical.count)


def arithmetic_speedup(
    kind: str, candidate: Candidate, calibration: Calibration, headroom: Headroom | None = None
) -> float:
    """The speedup a backend gives the region's arithmetic of ``kind``: its kind's calibrated figure (capped
    by ``headroom``), except elementwise and normalisation work in a region where convolutions dominate,
    which goes with the convolutions: the convolution is calibrated as the block it appears in (conv →
    batch norm → ReLU → conv → batch norm, the input added, → ReLU: a residual block, whose normalisations,
    activations and sum the backend folds into its convolutions)."""
    dominant = dominant_kind(candidate)
    if kind == "elementwise_norm" and dominant is not None and dominant in FUSED_WITH_NEIGHBOURS:
        return calibration.speedup(dominant)
    return capped_speedup(kind, calibration.speedup(kind), headroom)


def dominant_kind(candidate: Candidate) -> str | None:
    """The compute kind (`COMPUTE_KINDS`) with the most time in the region, None when it has none."""
    kind = max(COMPUTE_KINDS, key=lambda k: candidate.mix.get(k, 0.0))
    return kind if candidate.mix.get(kind, 0.0) > 0 else None


def upper_bound(share: float) -> float:
    """End-to-end speedup if a region of this share took no time: ``1 / (1 - share)``, capped.

    >>> round(upper_bound(0.8), 9)
    5.0
    """
    return min(UPPER_BOUND_CAP, 1 / (1 - share)) if share < 1 else UPPER_BOUND_CAP


def speedup_text(value: float) -> str:
    """A predicted or bounding speedup as every reader shows it: ``1.23×`` (`factor`), or ``∞`` at `UPPER_BOUND_CAP`."""
    return "∞" if value >= UPPER_BOUND_CAP else factor(value)


def end_to_end(share: float, region_speedup: float) -> float:
    """End-to-end speedup when a region of this share runs ``region_speedup`` times faster (Amdahl).

    >>> round(end_to_end(0.5, 2.0), 3)
    1.333
    """
    rest = (1 - share) + share / region_speedup
    return 1 / rest if rest > 0 else UPPER_BOUND_CAP
