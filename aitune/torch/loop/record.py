"""What one way of tuning left (`Tuning`: the tuned regions, their trials, outcomes, switches and undo), and
how two such records are joined into one."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from aitune.compare.quality import TaskJudgment
from aitune.compare.verification import Verification
from aitune.torch.tuning.outcome import RegionOutcome
from aitune.torch.tuning.plan_write import TunedRegion
from aitune.torch.tuning.verify import Switch


@dataclass(frozen=True)
class Tuning:
    """What one way of tuning left: the tuned regions, what tuning each gave, each path's winner and reason, and its
    undo."""

    tuned: list[TunedRegion]
    results: dict[str, tuple[RegionOutcome, ...]] | None  # by path, each trial in order; None: a plan was applied
    outcomes: dict[str, tuple[str, str | None]]
    undo: Callable[[], None]
    switches: dict[str, Switch]  # by tuned path: how to run its original code, how to put it back
    verification: Verification | None = None  # once verified
    judgment: TaskJudgment | None = None  # the task gate's, at a reduced precision
    refusals: dict[str, str] = field(default_factory=dict)  # by path: why the task gate put its reduced winner back
    generation: Mapping[str, str] | None = None  # the generate settings it runs under (the decoder recipe's)
    generation_cost: float | None = None  # eager with those settings ÷ eager without, timed in turns before tuning


def with_earlier(earlier: Tuning, tuning: Tuning) -> Tuning:
    """``tuning`` with what an ``earlier`` way of tuning tried and put back kept in its report."""
    checks = earlier.verification.checks if earlier.verification is not None else []
    verification = tuning.verification
    if checks:
        later = verification.checks if verification is not None else []
        verification = Verification([*checks, *later], verification.end_to_end if verification is not None else None)
    return replace(
        tuning,
        results=_trials(earlier, tuning),
        outcomes={**earlier.outcomes, **tuning.outcomes},
        verification=verification,
        refusals={**earlier.refusals, **tuning.refusals},
    )


def _trials(first: Tuning, then: Tuning) -> dict[str, tuple[RegionOutcome, ...]]:
    """Every path's trials of ``first`` and then of ``then``, in that order."""
    trials = dict(first.results or {})
    for path, outcomes in (then.results or {}).items():
        trials[path] = (*trials.get(path, ()), *outcomes)
    return trials


def joined(first: Tuning, again: Tuning) -> Tuning:
    """``first`` with the regions ``again`` tuned anew (at fp32, after the task gate refused their reduced winner):
    both trials kept in order, ``again``'s winner and reason for those paths, and one undo for both."""
    outcomes = {
        path: (winner, f"{first.outcomes[path][1]}; at fp32: {reason}" if reason and path in first.outcomes else reason)
        for path, (winner, reason) in again.outcomes.items()
    }

    def undo() -> None:
        first.undo()
        again.undo()

    return replace(
        first,
        tuned=[*first.tuned, *again.tuned],
        results=_trials(first, again),
        outcomes={**first.outcomes, **outcomes},
        undo=undo,
        switches={**first.switches, **again.switches},
    )
