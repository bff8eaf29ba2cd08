"""Tuning decided together under ``torch.distributed``: one decision for the job, judged by its slowest rank.

Under torchrun every rank tunes its own shard, but a tensor-parallel job must run one plan: two ranks
that picked different backends would drift apart or wait in a collective forever. So while
`joined` holds, every decision point asks the job, not the rank:

- **each timed round** (a trial's candidate against eager, a verification's whole runs): every rank's
  times are gathered and each rank continues with the slowest rank's time of each call, so every rank
  sees the same figures, settles after the same round and reaches the same verdict, and the figure
  is the job's (a step ends when its slowest rank ends); whether any rank's deadline has passed is
  gathered with them;
- **each correctness gate**: a backend any rank rejects is rejected on every rank, with that rank's reason;
- **each budget skip**: a backend any rank's time budget skips is skipped on every rank.

Nothing else is exchanged: winners follow from identical figures, so no broadcast of a choice is
needed (the plan is written by rank 0, see `aitune.cli.loop`). Every collective runs on aitune's own
gloo group (`aitune.torch.performance.distributed.RankSession`), whose timeout bounds it: a rank that
dies or hangs ends the others with one sentence (`TuningError`) instead of a hang.

Without a process group of more than one rank, `active` is None and every hook returns at once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from aitune.compare.ranks import rank_figures, run_times
from aitune.errors import TuningError
from aitune.report.merge import RankProfile, merge_profiles
from aitune.torch.performance.distributed import RankSession, rank_session

STRAGGLER = "RANK_STRAGGLER"  # the merge's warning code for a rank slower than the others (`rank_straggler`)
_ACTIVE: list[JobCollective] = []
_Result = TypeVar("_Result")  # the job joined by the innermost `joined` block, if any


class JobCollective:
    """This rank's side of the job's tuning decisions; every method is one collective on aitune's group."""

    def __init__(self, session: RankSession) -> None:
        self._session = session
        self.rank: int = session.info["rank"]
        self.world_size: int = session.info["world_size"]

    def slowest(self, times_us: Sequence[float], past_deadline: bool = False) -> tuple[list[list[float]], bool]:
        """Every rank's ``times_us`` of one round (rows by rank), and whether any rank's deadline has passed."""
        row = torch.tensor([*times_us, 1.0 if past_deadline else 0.0], dtype=torch.float64)
        rows = [torch.empty_like(row) for _ in range(self.world_size)]
        with self._answered("timed round"):
            dist.all_gather(rows, row, group=self._session.group)
        return [r[:-1].tolist() for r in rows], any(r[-1].item() > 0 for r in rows)

    def first_refusal(self, reason: str | None, what: str) -> tuple[int, str] | None:
        """(rank, reason) of the lowest rank that refused ``what`` (``reason`` not None), or None when none did."""
        reasons: list[Any] = [None] * self.world_size
        with self._answered(what):
            dist.all_gather_object(reasons, reason, group=self._session.group)
        return next(((rank, str(text)) for rank, text in enumerate(reasons) if text is not None), None)

    def gather(self, value: Any, what: str) -> list[Any]:
        """Every rank's ``value`` (a small JSON-like object), in rank order."""
        values: list[Any] = [None] * self.world_size
        with self._answered(what):
            dist.all_gather_object(values, value, group=self._session.group)
        return values

    @contextmanager
    def _answered(self, what: str) -> Iterator[None]:
        try:
            yield
        except RuntimeError as error:  # gloo: a peer closed its connection, or the group's timeout passed
            seconds = self._session.timeout.total_seconds()
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise TuningError(
                f"rank {self.rank} stopped tuning: another rank did not answer the {what} within {seconds:g} s "
                f"({first}); the rank that failed or hung first is the one to look at."
            ) from None


def active() -> JobCollective | None:
    """The job this rank tunes with, or None (one process, or outside `joined`): then every decision is local."""
    return _ACTIVE[-1] if _ACTIVE else None


@contextmanager
def joined() -> Iterator[JobCollective | None]:
    """Tune as one rank of the job while the block runs (None and nothing done when not distributed).

    Every rank must enter at the same point. The group is the app's when it has one, else aitune's for the
    block; a failure on one rank ends the others' tuning with one sentence naming it.
    """
    if active() is not None:  # already joined (the loop around `tune`): one set of collectives
        yield active()
        return
    with rank_session("tuning") as session:
        if session is None:
            yield None
            return
        _ACTIVE.append(JobCollective(session))
        try:
            yield _ACTIVE[-1]
        finally:
            _ACTIVE.pop()


def together(function: Callable[..., _Result]) -> Callable[..., _Result]:
    """``function`` run inside `joined`: the tuning entry points (`aitune.torch.optimize`, `aitune.torch.tune`)."""

    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> _Result:
        with joined():
            return function(*args, **kwargs)

    return run


def world_size() -> int:
    """How many ranks tune together: 1 outside a job."""
    job = active()
    return job.world_size if job is not None else 1


def job_document(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """Under torchrun, every rank's capture merged into the job's document (`aitune.report.merge`: each step its
    slowest rank's, stragglers named), the same on every rank; else ``doc`` itself."""
    job = active()
    if job is None:
        return doc
    docs = job.gather(doc, "gathering of the captures")
    return merge_profiles(RankProfile(rank, Path(f"rank{rank}/profile.json"), each) for rank, each in enumerate(docs))


def job_figures(
    before: Mapping[str, Any], after: Mapping[str, Any], job_before: Mapping[str, Any]
) -> dict[str, Any] | None:
    """Under torchrun, each rank's median run before and after tuning, the job's (`rank_figures`) and the
    stragglers the merged capture before tuning (``job_before``) named; else None."""
    job = active()
    if job is None:
        return None
    runs = job.gather((run_times(before), run_times(after)), "gathering of the run times")
    named = [item["message"] for item in job_before.get("warnings", []) if item.get("code") == STRAGGLER]
    return {**rank_figures([side[0] for side in runs], [side[1] for side in runs]), "stragglers": named}


def agreed_refusal(reason: str | None, what: str) -> str | None:
    """``reason``, or under torchrun the first rank's refusal of ``what`` (``rank r: reason``) when any rank refused."""
    job = active()
    if job is None:
        return reason
    refusal = job.first_refusal(reason, what)
    return None if refusal is None else f"rank {refusal[0]}: {refusal[1]}"


def job_round(times_us: list[float], past_deadline: bool) -> tuple[list[float], bool, list[list[float]] | None]:
    """One timed round as the job saw it: each call's slowest-rank time, whether any rank's deadline passed, and
    every rank's own times (None when not distributed: the round is this process's)."""
    job = active()
    if job is None:
        return times_us, past_deadline, None
    rows, past = job.slowest(times_us, past_deadline)
    return [max(column) for column in zip(*rows, strict=True)], past, rows


def job_measure(measure: Callable[[frozenset[str]], list[float]]) -> Callable[[frozenset[str]], list[float]]:
    """``measure`` (one whole run per call) returning the job's times: each call's slowest rank's."""
    if active() is None:
        return measure
    return lambda enabled: job_round(measure(enabled), False)[0]


def job_clock(clock: Callable[[], float], deadline: float | None) -> Callable[[], float]:
    """``clock`` as the job reads it against ``deadline``: past it on every rank once it is past on any."""
    if active() is None or deadline is None:
        return clock
    return lambda: deadline if job_round([], clock() >= deadline)[1] else float("-inf")
