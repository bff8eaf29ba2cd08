"""One graph's trial: build each candidate backend, run it on every recorded sample, gate it, time it.

A failing candidate never escapes: any exception at build or run becomes a rejected candidate whose
reason keeps the exception's type and message, and whatever it built is released at once. Out-of-disk
(``OSError(ENOSPC)``) is the exception: no fallback can fix it, so it propagates.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.utils._pytree as pytree

from aitune.errors import is_out_of_disk
from aitune.torch.backends import Backend, BuildContext, Built
from aitune.torch.backends.held_memory import HeldMemory, measuring
from aitune.torch.backends.threads import same_threads
from aitune.torch.tuning.collective import agreed_refusal
from aitune.torch.tuning.correctness import Agreement, Tolerance, check_calls
from aitune.torch.tuning.decision import Decision, decide
from aitune.torch.tuning.measure import Latency, MeasureConfig, Settled, measure_interleaved

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
STRUCTURE_ONLY = Tolerance(rtol=math.inf, atol=math.inf)
"""The per-module gate of a reduced-precision candidate: the same structure, shapes, dtypes and finite values,
any numbers (their effect is judged on the task's output, `aitune.torch.tuning.task_gate`)."""
TIMED_SAMPLES = 4  # one timed call runs this many recorded samples, enough to cover their shapes


@dataclass
class Candidate:
    """One backend's outcome for one graph: ``accepted``, ``winner``, ``rejected`` or ``skipped`` and why."""

    backend: Backend
    status: str = "accepted"
    reason: str | None = None
    build_s: float | None = None
    latency: Latency | None = None
    eager: Latency | None = None  # the original module, timed in turns with this candidate
    agreement: Agreement | None = None
    built: Built | None = None
    build_details: dict[str, Any] = field(default_factory=dict)  # kept after a rejection releases ``built``
    decision: Decision | None = None  # against eager on the paired rounds, when timed for a margin
    held: HeldMemory | None = None  # the memory what it built holds beside the original module, measured

    @property
    def passed(self) -> bool:
        return self.status in ("accepted", "winner")

    @property
    def speedup(self) -> float | None:
        """Eager median ÷ this candidate's median, both timed in turns; None when not timed."""
        if self.latency is None or self.eager is None or self.latency.median_us <= 0:
            return None
        return self.eager.median_us / self.latency.median_us

    def reject(self, reason: str) -> None:
        """Mark rejected and free what the build holds."""
        self.status, self.reason = "rejected", reason
        self.release()

    def release(self) -> None:
        if self.built is not None:
            self.built.release()
            self.built = None

    def win_if_passed(self) -> Candidate | None:
        if not self.passed:
            return None
        self.status = "winner"
        return self


class Trial:
    """Evaluates candidates for one graph against the original module and keeps every outcome in order."""

    def __init__(
        self,
        context: BuildContext,
        tolerance: Tolerance,
        config: MeasureConfig,
        timed: bool = True,
        region: str = "",
        precision: str = "fp32",
    ) -> None:
        self.context = context
        self.region = region  # the module's name: a time budget gives each region its share
        self.tolerance = tolerance.on(context.device)  # TF32-level on a device that computes float32 in TF32
        self.precision = precision  # the level tuned at: its backends are offered, judged on the task later
        self.config = config
        self.timed = timed
        self.candidates: list[Candidate] = []
        self._eager: Latency | None = None
        self._settled: Settled | None = None  # when timing stops: the current candidate's margin decides

    @property
    def build_seconds(self) -> float:
        """Total build time of the candidates so far."""
        return sum(c.build_s or 0.0 for c in self.candidates)

    @property
    def measured_eager(self) -> Latency | None:
        """The eager latency timed beside the first timed candidate, if any was timed."""
        return self._eager

    def skip(self, backend: Backend, reason: str) -> Candidate:
        candidate = Candidate(backend, status="skipped", reason=reason)
        self.candidates.append(candidate)
        return candidate

    def evaluate(self, backend: Backend, margin: float | None = None) -> Candidate:
        """Build, run on every sample, gate and (if timed) measure one backend.

        With ``margin``, timing goes on in rounds until `decide` settles whether the candidate beats eager
        by it (or the measure config's caps are hit), and the candidate carries that decision.
        """
        reason = self.not_offered(backend)
        if reason is not None:
            return self.skip(backend, reason)
        candidate = Candidate(backend)
        self.candidates.append(candidate)
        self._settled = _decided(margin) if margin is not None else None
        start = time.perf_counter()
        try:
            with same_threads(), measuring(self.context.device) as held:  # same threads: timed on one budget
                candidate.built = backend.build(_for_build(self.context))
        except Exception as error:  # a backend failing to build is an expected outcome, kept in the report
            _raise_if_out_of_disk(error, candidate)
            candidate.build_s = time.perf_counter() - start
            candidate.reject(f"build failed: {_describe(error)}")
        else:
            candidate.build_s = time.perf_counter() - start
            candidate.build_details = candidate.built.details
            candidate.held = candidate.built.held or held  # the backend's narrower measure when it made one
            self._check(candidate)
        self._agree(candidate)
        if candidate.passed and self.timed:
            self._time(candidate)
        if margin is not None and candidate.latency is not None and candidate.eager is not None:
            candidate.decision = decide(candidate.eager.times_us, candidate.latency.times_us, margin)
        return candidate

    def _check(self, candidate: Candidate) -> None:
        """Run the candidate on every sample and gate its outputs; a failure or disagreement rejects it."""
        run = candidate.built.run
        try:
            with torch.no_grad():
                outputs = [s.observe(run) for s in self.context.samples]  # each run on its own fresh copy
        except Exception as error:  # same: a run failure rejects the candidate, never the user's model
            _raise_if_out_of_disk(error, candidate)
            candidate.reject(f"run failed: {_describe(error)}")
            return
        context = self.context
        tolerance = self.tolerance if candidate.backend.precision == "fp32" else STRUCTURE_ONLY
        candidate.agreement = check_calls(context.reference_outputs, context.reference_states, outputs, tolerance)
        del outputs
        if not candidate.agreement.passed:
            candidate.reject(f"outside tolerance: {candidate.agreement.problem}")

    def _agree(self, candidate: Candidate) -> None:
        """Under torchrun, a candidate any rank's gate rejected is rejected on every rank, with that rank's reason."""
        reason = None if candidate.passed else candidate.reason
        agreed = agreed_refusal(reason, f"correctness gate of {candidate.backend.name} for '{self.region}'")
        if agreed is not None and agreed != reason:
            candidate.reject(agreed)

    def _time(self, candidate: Candidate) -> None:
        try:
            candidate.eager, candidate.latency = self._measure(self.context.forward, candidate.built.run)
            self._eager = self._eager or candidate.eager
        except Exception as error:  # a failure while timed rejects the candidate like any run failure
            _raise_if_out_of_disk(error, candidate)
            candidate.reject(f"run failed while timed: {_describe(error)}")

    def _measure(self, *runs: Any) -> list[Latency]:
        """Each of ``runs`` timed over the timed samples, taking turns."""
        samples = self.context.samples[:TIMED_SAMPLES]
        calls = [lambda run=run: [s.call(run) for s in samples] for run in runs]
        return measure_interleaved(calls, self.config, self.context.device, self._settled)

    def not_offered(self, backend: Backend) -> str | None:
        """Why ``backend`` is not tried here at all (not available, precision not admitted, nothing to do), or None."""
        unavailable = backend.unavailable_reason(self.context.device)
        if unavailable is not None:
            return f"not available: {unavailable}"
        if backend.precision != "fp32" and backend.precision != self.precision:
            return (
                f"not offered: it computes in {backend.precision}, which is judged on the task; pass "
                f"--precision {backend.precision} (precision={backend.precision!r}) to try it"
            )
        unsuited = backend.unsuited_reason(self.context.module)
        if unsuited is not None:
            return f"not offered: {unsuited}"
        precision = backend.reduced_precision
        if precision is None:
            return None
        for dtype in _floating_dtypes(self.context.reference_outputs):
            if not self.tolerance.admits(precision, dtype):
                rtol = self.tolerance.for_dtype(dtype)[0]
                eps = torch.finfo(precision).eps
                return (
                    f"not offered: rtol {rtol:g} for {dtype} outputs is below {precision}'s resolution {eps:.1e};"
                    f" pass Tolerance(rtol={eps:.0e}) or more to admit reduced precision"
                )
        return None


def _decided(margin: float) -> Settled:
    """Timing is settled once the paired rounds (eager first, the candidate second) give a verdict."""
    return lambda times: decide(times[0], times[1], margin).settled


def _for_build(context: BuildContext) -> BuildContext:
    """The context a backend builds from: its samples are copies, as a build may run them and change their state."""
    return replace(context, samples=[sample.fresh() for sample in context.samples])


def _raise_if_out_of_disk(error: Exception, candidate: Candidate) -> None:
    if is_out_of_disk(error):
        candidate.release()
        raise error


def _floating_dtypes(outputs: list[Any]) -> set[torch.dtype]:
    leaves = pytree.tree_leaves(outputs)
    return {leaf.dtype for leaf in leaves if isinstance(leaf, torch.Tensor) and leaf.dtype.is_floating_point}


def _describe(error: BaseException) -> str:
    """``Type: message`` of the root cause (exporters wrap the useful error in pages of advice), one line."""
    root = error
    while root.__cause__ is not None:
        root = root.__cause__
    text = " ".join(_ANSI.sub("", str(root)).split())
    return f"{type(root).__name__}: {text[:300]}"
