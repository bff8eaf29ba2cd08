"""Which precision each region ended at, and why: the reduced level's candidate set beside the fp32 ones.

At a reduced precision the candidates are the level's backends and the fp32 defaults, built behind the
same gate and timed against the same eager rounds (`aitune.torch.backends.precision_backends`); the fastest
wins, then the task gate and the end-to-end check judge it. A user who asked for int8 reads here why a
region runs in fp32 after all, with the measured figures:
``body: fp32, int8_dynamic slower than inductor (1.10× vs 2.05× over eager; its largest linear layer is
64x2, and this CPU has no one-step int8 dot product (VNNI, AMX)); kept inductor``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from aitune.report.formatting import factor
from aitune.torch.tuning.outcome import EAGER, CandidateResult, GraphResult, RegionOutcome


@dataclass(frozen=True)
class PrecisionChoice:
    """One region: the level it runs at after the loop (``fp32`` when put back) and why, in one clause."""

    path: str
    precision: str
    why: str

    def line(self) -> str:
        return f"{self.path or '(whole model)'}: {self.precision}, {self.why}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def precision_choice(path: str, outcome: RegionOutcome, runs: str, put_back: str | None) -> PrecisionChoice | None:
    """The choice of the region tuned as ``outcome`` that now ``runs`` that backend (``eager`` when nothing won or
    it was put back, ``put_back`` then saying why); None when no reduced-precision candidate was in its trial."""
    graph = outcome.leading or max(outcome.graphs, key=lambda each: each.samples, default=None)
    reduced = _reduced(graph) if graph is not None else None
    if graph is None or reduced is None:
        return None
    winning = graph.winning
    if winning is not None and winning.precision != "fp32":
        if runs != EAGER:
            return PrecisionChoice(path, winning.precision, _kept_reduced(graph, winning))
        return PrecisionChoice(path, "fp32", put_back or f"{winning.backend} put back; the region runs eager")
    if runs != EAGER:
        kept = f"kept {runs}"
    elif winning is not None:  # an fp32 winner a later check put back
        kept = put_back or f"{winning.backend} put back; the region runs eager"
    else:
        kept = "no fp32 candidate won either; the region runs eager"
    return PrecisionChoice(path, "fp32", f"{reduced.backend} {_why_lost(reduced)}; {kept}")


def _reduced(graph: GraphResult) -> CandidateResult | None:
    """The reduced-precision candidate that went furthest in the graph: the winner, else the fastest, else the first."""
    tried = [candidate for candidate in graph.candidates if candidate.precision != "fp32"]
    timed = [candidate for candidate in tried if candidate.speedup is not None]
    won = [candidate for candidate in tried if candidate.won]
    if won or timed:
        return (won or sorted(timed, key=lambda candidate: -(candidate.speedup or 0.0)))[0]
    return tried[0] if tried else None


def _kept_reduced(graph: GraphResult, winning: CandidateResult) -> str:
    """``int8_dynamic 2.31× over eager, faster than inductor 1.90×; the task gate passed``."""
    rivals = [c for c in graph.candidates if c.precision == "fp32" and c.speedup is not None and c.status != "skipped"]
    fastest = max(rivals, key=lambda candidate: candidate.speedup or 0.0, default=None)
    versus = f", faster than {fastest.backend} {factor(fastest.speedup)}" if fastest is not None else ""
    figure = f" {factor(winning.speedup)} over eager" if winning.speedup is not None else ""
    return f"{winning.backend}{figure}{versus}; the task gate passed"


def _why_lost(candidate: CandidateResult) -> str:
    """The candidate's own reason (its figures included), with what makes int8 slow here when it was timed."""
    reason = candidate.reason or candidate.status
    cause = _int8_cause(candidate) if candidate.speedup is not None else None
    if cause is None:
        return reason
    return f"{reason[:-1]}; {cause})" if reason.endswith(")") else f"{reason} ({cause})"


def _int8_cause(candidate: CandidateResult) -> str | None:
    """What dynamic int8 pays for here: the layer sizes and the CPU's int8 instructions (its build's details)."""
    details = candidate.build_details or {}
    if "largest_linear" not in details:
        return None
    instructions = details.get("int8_dot_products")
    cpu = (
        f"this CPU multiplies int8 with {instructions}"
        if instructions
        else "this CPU has no one-step int8 dot product (VNNI, AMX)"
    )
    return f"its largest linear layer is {details['largest_linear']}, and {cpu}"
