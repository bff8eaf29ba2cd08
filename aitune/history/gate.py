"""`history check`: a new profile against the stored runs of its workload on its machine kind."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aitune.errors import HistoryError
from aitune.history.check import ALPHA, THRESHOLD, RowVerdict, judge, regressions
from aitune.history.record import RunRecord, machine_differences, record_of
from aitune.history.steps import Step, steps
from aitune.history.store import HistoryStore, StoredRun
from aitune.report.model import ProfileLike

BASELINE_RUNS = 20
MIN_BASELINE_RUNS = 5
"""Fewest stored runs a check judges against: fewer cannot show how much whole captures vary from one to the
next on the machine (on a shared one, by tens of percent), so no row of such a check regresses."""


@dataclass(frozen=True)
class CheckResult:
    """What `check_against_history` found: the rows judged, the baseline's size, and the run time's steps."""

    record: RunRecord
    baseline: tuple[StoredRun, ...]
    verdicts: tuple[RowVerdict, ...]
    steps: tuple[Step, ...]  # over the baseline's run-time medians and the new run's, oldest first
    threshold: float
    alpha: float
    other_machines: tuple[str, ...] = ()  # with --any-machine: the differences it compared across

    @property
    def enough(self) -> bool:
        """Whether the baseline holds `MIN_BASELINE_RUNS` runs, so that its verdicts can fail the gate."""
        return len(self.baseline) >= MIN_BASELINE_RUNS

    @property
    def regressed(self) -> list[RowVerdict]:
        return regressions(self.verdicts) if self.enough else []


def check_against_history(
    store: HistoryStore,
    doc: ProfileLike,
    *,
    branch: str | None = None,
    last: int = BASELINE_RUNS,
    threshold: float = THRESHOLD,
    alpha: float = ALPHA,
    any_machine: bool = False,
    domain: str | None = None,
) -> CheckResult:
    """Judge ``doc`` against the last ``last`` stored runs of its workload (on ``branch``), on the same machine
    kind; `HistoryError` naming the differences when only other machines have runs, unless ``any_machine``."""
    record = record_of(doc, domain=domain)
    baseline = _without(record, store.recent(record.workload, record.machine, last + 1, branch))[-last:]
    differences: list[str] = []
    if not baseline:
        others = _without(record, store.recent(record.workload, None, last + 1, branch))[-last:]
        if others:
            differences = machine_differences(record.environment, others[-1].record.environment)
            if not any_machine:
                raise HistoryError(
                    f"the stored runs of this workload are from another machine kind ({'; '.join(differences)}); "
                    "pass --any-machine to compare across them."
                )
            baseline = others
    baseline = [stored for stored in baseline if stored.record.domain == record.domain]
    verdicts = judge(record, [stored.record for stored in baseline], threshold=threshold, alpha=alpha)
    medians = [stored.record.run_time.median_us for stored in baseline] + [record.run_time.median_us]
    return CheckResult(
        record, tuple(baseline), tuple(verdicts), tuple(steps(medians)), threshold, alpha, tuple(differences)
    )


def _without(record: RunRecord, stored: Sequence[StoredRun]) -> list[StoredRun]:
    """``stored`` less the new profile itself, when it was added already (same creation time and samples)."""
    return [
        run
        for run in stored
        if not (run.record.created_at == record.created_at and run.record.run_time == record.run_time)
    ]
