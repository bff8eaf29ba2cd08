"""Capture under ``torch.distributed``: which rank this is, the process group, the alignment barrier, failures.

A capture is distributed when the launcher's environment says so (``RANK`` and ``WORLD_SIZE`` > 1,
as torchrun sets them) or when the process group is already initialised with more than one rank.
The app's own group is used as it is; when the environment says distributed and nobody has
initialised a group, aitune initialises one (gloo, and nccl for CUDA tensors when there is CUDA)
and destroys it afterwards.
Every rank writes its own files, in ``rank<r>/`` beside where a single process writes them.

Invariant: every rank makes the same collective calls in the same order: the group, the host
gather, the same number of warmups (they agree on when to stop), one barrier before each
measured run, one at the end.

A failing rank must not leave the others hanging: the barrier is gloo's ``monitored_barrier`` on a
group of aitune's own with a timeout (``AITUNE_DISTRIBUTED_TIMEOUT_S``, default 60 s, also the
timeout of a group aitune creates); a rank whose capture fails leaves a note in the group's store
so that the others' sentence names it; and the launcher's SIGTERM (torchrun sends it to the
survivors when one rank exits non-zero) ends the capture the way an error does, hooks restored
and partial files removed, instead of killing the process mid-write.
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple

import torch
import torch.distributed as dist

from aitune.errors import CaptureError

TIMEOUT_ENV = "AITUNE_DISTRIBUTED_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 60.0
_NOTE_PREFIX = "aitune/failed/"
_NOTE_GRACE_S = 1.0  # how long a failing rank waits for another's note: the first failure may land a moment later
_GROUPS_MADE = itertools.count()  # the same on every rank: every rank makes the same groups in the same order
_MISSING_RANKS = re.compile(r"Ranks? ([\d, ]+) failed to pass monitoredBarrier")
# What gloo says when a collective lost its peer or gave up waiting for it: this rank is not the one that failed.
_PEER_LOST = re.compile(r"Connection (closed|reset) by peer|Timed out waiting|timed out|Broken pipe", re.IGNORECASE)


class LaunchedRank(NamedTuple):
    """What the launcher's environment says about this process."""

    rank: int
    world_size: int
    local_rank: int


def launched_rank(environ: dict[str, str] | None = None) -> LaunchedRank | None:
    """This process's rank from ``RANK``, ``WORLD_SIZE`` (> 1) and ``LOCAL_RANK``; None when not launched so."""
    env = os.environ if environ is None else environ
    if "RANK" not in env or "WORLD_SIZE" not in env:
        return None
    try:
        rank, world_size = int(env["RANK"]), int(env["WORLD_SIZE"])
        local_rank = int(env.get("LOCAL_RANK", rank))
    except ValueError:
        raise CaptureError(
            f"RANK={env['RANK']!r}, WORLD_SIZE={env['WORLD_SIZE']!r} or LOCAL_RANK={env.get('LOCAL_RANK')!r} "
            "is not an integer; launch with torchrun or fix the launcher's environment."
        ) from None
    if world_size <= 1:
        return None
    if not 0 <= rank < world_size:
        raise CaptureError(f"RANK={rank} is outside WORLD_SIZE={world_size}; fix the launcher's environment.")
    return LaunchedRank(rank, world_size, local_rank)


def is_distributed() -> bool:
    """Whether a capture here is one rank of many (the environment says so, or a group of > 1 is up)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size() > 1
    return launched_rank() is not None


def rank_path(path: str | Path, rank: int) -> Path:
    """``path`` moved into a ``rank<r>`` folder beside it (``out/trace.json`` → ``out/rank0/trace.json``);
    a path already in that folder is kept, so a caller may name the rank's own file."""
    path = Path(path)
    folder = f"rank{rank}"
    return path if path.parent.name == folder else path.parent / folder / path.name


def timeout_s(environ: dict[str, str] | None = None) -> float:
    """The bound on waiting for another rank, in seconds (``AITUNE_DISTRIBUTED_TIMEOUT_S``, default 60)."""
    text = (os.environ if environ is None else environ).get(TIMEOUT_ENV)
    if text is None:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise CaptureError(f"{TIMEOUT_ENV}={text!r} is not a positive number of seconds; set it to e.g. 60.")
    return value


def host_index(hosts: list[str], rank: int) -> int:
    """The index of ``rank``'s host among the sorted distinct host names of the job (never the name itself)."""
    return sorted(set(hosts)).index(hosts[rank])


def local_rank_of(hosts: list[str], rank: int) -> int:
    """How many lower ranks share ``rank``'s host: its local rank when the launcher did not say."""
    return sum(1 for other in hosts[:rank] if other == hosts[rank])


class LauncherStopped(BaseException):
    """The launcher sent SIGTERM: a BaseException, so no ``except Exception`` in the workload swallows it."""


class RankSession:
    """This rank's part of a distributed capture, from the group's set-up to its teardown.

    Enter on every rank at the same point; `barrier` before each measured run, `all_steady` while
    warming up, `finish` after the last run. An error leaving the block becomes one sentence naming
    the rank that failed first.
    """

    def __init__(self, timeout: float | None = None, activity: str = "capture") -> None:
        self.timeout = timedelta(seconds=timeout if timeout is not None else timeout_s())
        self.activity = activity  # what a failure stops, in its sentence: "capture" or "tuning"
        self.owns_group = False
        self.info: dict[str, Any] = {}
        self._group: Any = None
        self._store: Any = None
        self._peer_failed = False  # a barrier found another rank missing: the failure is not this rank's

    def __enter__(self) -> RankSession:
        launched = launched_rank()
        try:
            if not dist.is_initialized():
                self._init_group(launched)
            # A gloo group of aitune's own: monitored_barrier (which names the missing rank) needs gloo,
            # and its timeout is aitune's whatever timeout the app gave its own group.
            self._group = dist.new_group(backend="gloo", timeout=self.timeout, group_desc="aitune_alignment")
            hosts: list[Any] = [None] * dist.get_world_size()
            dist.all_gather_object(hosts, socket.gethostname(), group=self._group)
        except (RuntimeError, ValueError) as error:  # torch's DistError family, or an incomplete environment
            self._teardown()
            which = f"rank {launched.rank}" if launched is not None else "this process"
            raise CaptureError(
                f"{which} could not meet the other ranks within {self.timeout.total_seconds():g} s "
                f"({_first_line(error)}); check that every rank started and that MASTER_ADDR and MASTER_PORT are set."
            ) from error
        except BaseException:
            self._teardown()
            raise
        rank = dist.get_rank()
        self.info = {
            "rank": rank,
            "world_size": dist.get_world_size(),
            "local_rank": launched.local_rank if launched is not None else local_rank_of(hosts, rank),
            "backend": str(dist.get_backend()),
            "host_index": host_index(hosts, rank),
        }
        self._store = _default_store()
        return self

    def _init_group(self, launched: LaunchedRank | None) -> None:
        """The default group from the launcher's environment, its store keys under a prefix of this session's own.

        A group destroyed and made again in one process (a script's own, then aitune's; two profile calls)
        restarts torch's group names, so without the prefix gloo would find the old group's addresses.
        """
        # With CUDA, nccl for CUDA tensors and gloo for CPU ones: a workload may all-reduce either.
        backend = "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"
        if torch.cuda.is_available() and launched is not None:
            torch.cuda.set_device(launched.local_rank % torch.cuda.device_count())
        store, rank, world_size = next(dist.rendezvous("env://", timeout=self.timeout))
        prefix = f"aitune/group{next(_GROUPS_MADE)}"
        dist.init_process_group(
            backend, store=dist.PrefixStore(prefix, store), rank=rank, world_size=world_size, timeout=self.timeout
        )
        self.owns_group = True

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, _traceback: TracebackType | None
    ) -> None:
        try:
            if error is not None:
                self._fail(error)
        finally:
            self._teardown()

    @property
    def rank(self) -> int:
        return self.info["rank"]

    @property
    def group(self) -> Any:
        """aitune's own gloo group of the job, every collective on it bounded by ``timeout``."""
        return self._group

    def barrier(self, before: str) -> float:
        """Wait until every rank is here; the wait in µs. ``before`` names what follows, for the error."""
        start = time.perf_counter_ns()
        try:
            dist.monitored_barrier(group=self._group, timeout=self.timeout, wait_all_ranks=True)
        except RuntimeError as error:
            missing = _MISSING_RANKS.search(str(error))
            who = f"rank {missing.group(1).strip()}" if missing else "another rank"
            self._peer_failed = True
            raise CaptureError(
                f"rank {self.rank} stopped: {who} did not reach the barrier before the {before} "
                f"within {self.timeout.total_seconds():g} s ({_first_line(error)})."
            ) from error
        return (time.perf_counter_ns() - start) / 1000

    def finish(self) -> None:
        """The barrier after the last measured run: no rank writes its files while another's capture may still fail."""
        self.barrier("end of the capture")

    def all_steady(self, steady: bool) -> bool:
        """Whether every rank's warmups are steady: all ranks then stop warming up after the same call."""
        flag = torch.tensor([1 if steady else 0], dtype=torch.int32)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=self._group)
        return bool(flag.item())

    def _fail(self, error: BaseException) -> None:
        """Raise the sentence naming the rank that failed first; leave this rank's note when it is that one."""
        other = self._other_note()
        if other is not None:
            failed, note = other
            raise CaptureError(
                f"rank {failed} failed ({note}); rank {self.rank} stopped its {self.activity} too."
            ) from None
        if self._peer_failed or isinstance(error, LauncherStopped):  # their sentences already say what happened
            return
        lost = _peer_lost(error)
        if lost is not None:
            raise CaptureError(
                f"rank {self.rank} stopped: a collective in its workload lost another rank or gave up waiting "
                f"for it ({lost}); the rank that failed or hung first is the one to look at."
            ) from None
        self._leave_note(_first_line(error))

    def _leave_note(self, note: str) -> None:
        if self._store is None:
            return
        with suppress(RuntimeError):  # the store's host is gone: the others learn of the failure from their own errors
            self._store.set(f"{_NOTE_PREFIX}{self.rank}", note[:500])

    def _other_note(self) -> tuple[int, str] | None:
        """(rank, note) of another rank that failed, waiting a moment for one; None when there is none."""
        if self._store is None:
            return None
        keys = [f"{_NOTE_PREFIX}{rank}" for rank in range(self.info["world_size"]) if rank != self.rank]
        deadline = time.monotonic() + _NOTE_GRACE_S
        try:
            while True:
                for key in keys:
                    if self._store.check([key]):
                        return int(key.removeprefix(_NOTE_PREFIX)), self._store.get(key).decode(errors="replace")
                if time.monotonic() >= deadline:
                    return None
                time.sleep(0.05)
        except RuntimeError:
            return None

    def _teardown(self) -> None:
        if self._group is not None:
            dist.destroy_process_group(self._group)
            self._group = None
        if self.owns_group and dist.is_initialized():
            dist.destroy_process_group()
            self.owns_group = False


@contextmanager
def rank_session(activity: str = "capture") -> Iterator[RankSession | None]:
    """A `RankSession` when this capture (or tuning) is distributed, else None; SIGTERM ends the block as an error."""
    if not is_distributed():
        yield None
        return
    with stopped_by_sigterm(activity), RankSession(activity=activity) as session:
        yield session


@contextmanager
def stopped_by_sigterm(activity: str = "capture") -> Iterator[None]:
    """SIGTERM raises `LauncherStopped` in the block (main thread only), so every ``finally`` and restore runs;
    it leaves the block as one sentence (`CaptureError`)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(_signal: int, _frame: Any) -> None:
        raise LauncherStopped()

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    except LauncherStopped:
        launched = launched_rank()
        which = f"rank {launched.rank}" if launched is not None else "this process"
        raise CaptureError(
            f"the launcher stopped {which} (SIGTERM) before its {activity} finished; "
            "another rank failed first: see that rank's error."
        ) from None
    finally:
        signal.signal(signal.SIGTERM, previous)


def trace_distributed_info(info: dict[str, Any]) -> dict[str, Any]:
    """The Chrome trace's ``distributedInfo`` (what torch's profiler writes, and HTA reads) for a trace torch
    did not give one: a lite capture's, or a whole script's whose group came up after the profiler."""
    return {"backend": info["backend"], "rank": info["rank"], "world_size": info["world_size"]}


def _default_store() -> Any:
    try:
        return dist.distributed_c10d._get_default_store()
    except (AttributeError, RuntimeError, ValueError):  # no store to share notes through: sentences say less
        return None


def _peer_lost(error: BaseException) -> str | None:
    """The first line of a collective's error, in ``error``'s causes, that says a peer is gone or late; else None."""
    current: BaseException | None = error
    while current is not None:
        if isinstance(current, RuntimeError) and _PEER_LOST.search(str(current)):
            return _first_line(current)
        current = current.__cause__
    return None


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
