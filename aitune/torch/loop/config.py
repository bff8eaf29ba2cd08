"""The loop's records: how it runs (`LoopConfig`), what it gives back (`LoopResult`), and the phase hook."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aitune.compare import ProfileDiff
from aitune.compare.end_to_end import EndToEnd, end_to_end
from aitune.compare.gains import RegionGain, Slowdown, WholeModel
from aitune.compare.loop_report import compare_report
from aitune.compare.quality import QualityBar, TaskJudgment
from aitune.compare.verification import Verification, VerifyConfig
from aitune.report import ProfileDoc
from aitune.suggest import Suggestions
from aitune.torch.tuning.correctness import Tolerance
from aitune.torch.tuning.plan_write import TunedRegion
from aitune.torch.tuning.precision_choice import PrecisionChoice
from aitune.torch.tuning.strategies import TuneStrategy

Tick = Callable[[], None]
PhaseHook = Callable[[str, int | None], Tick]
"""``on_phase(name, calls)`` is told each phase as it starts (with its number of workload calls, when known)
and returns what to call after each of them: a progress bar's advance."""


@dataclass(frozen=True)
class LoopConfig:
    """How the loop captures, chooses and tunes; ``targets`` (paths) overrides suggest's choice of ``top``."""

    top: int = 3
    targets: tuple[str, ...] | None = None
    mode: str = "aot"  # aot: wrap by path and tune once; jit: register by path, tune on the workload's own calls
    strategy: TuneStrategy | None = None  # None: min-latency over the default backends, with ``tolerance``
    tolerance: Tolerance = field(default_factory=Tolerance)
    warmup_runs: int = 3
    measured_runs: int = 10
    record_calls: int = 2  # workload calls recorded for tuning (each wrapper keeps up to 8 samples per graph)
    verification: VerifyConfig | None = field(default_factory=VerifyConfig)  # None: keep what the trials chose
    precision: str = "fp32"  # bf16 or int8: the level's backends, judged on the task (never chosen implicitly)
    quality: QualityBar | None = None  # the task gate's bar; None: the default of the output's kind


@dataclass
class LoopResult:
    """Both profiles, what suggest said, the tuning report, the diff, the gain per region and the plan."""

    before: ProfileDoc
    after: ProfileDoc
    suggestions: Suggestions | None  # suggest's, each region priced for the backend that won it; None: a plan chose
    tuning: dict[str, Any] | None  # None when a plan was applied
    diff: ProfileDiff
    gains: list[RegionGain]
    plan: dict[str, Any]
    tuned: list[TunedRegion]  # left tuned in the target
    whole_model: WholeModel | None = None  # how the whole model weighed against the separate regions
    undo: Callable[[], None] = field(repr=False, default=lambda: None)
    verification: Verification | None = None  # the end-to-end check of the tuned regions; None: not run
    slowdowns: list[Slowdown] = field(default_factory=list)  # untuned regions slower after tuning, beyond noise
    precision: str = "fp32"
    task_gate: TaskJudgment | None = None  # the task gate's verdict on the reduced-precision regions; None: none ran
    precision_choices: list[PrecisionChoice] = field(default_factory=list)  # reduced precision: each region's level
    ranks: dict[str, Any] | None = None  # under torchrun: each rank's and the job's figures (`rank_figures`)
    job_sides: tuple[ProfileDoc, ProfileDoc] | None = None  # under torchrun: the ranks' merged captures, before/after
    generation: Mapping[str, str] | None = None  # the generate settings the tuning runs under (the plan's too)

    @property
    def end_to_end(self) -> EndToEnd:
        """The end-to-end figure a user reads: the verified one (`aitune.compare.end_to_end`)."""
        return end_to_end(self.diff, self.gains, self.verification)

    def comparison(self) -> dict[str, Any]:
        """The compare report (`aitune.compare.loop_report.compare_report`): the diff, the end-to-end speedup
        (before ÷ after, verified) beside the captures' and the gain per tuned region."""
        return compare_report(
            self.diff,
            self.gains,
            whole_model=self.whole_model,
            verification=self.verification,
            slowdowns=self.slowdowns,
            precision=self.precision,
            task_gate=self.task_gate,
            ranks=self.ranks,
        )

    def restore(self) -> None:
        """Take the tuned wrappers (or JIT registration) out of the target again: its modules run as before."""
        self.undo()
        self.undo, self.tuned = (lambda: None), []


def silent(_name: str, _calls: int | None) -> Tick:
    """The phase hook when none is given: nothing is shown."""
    return lambda: None
