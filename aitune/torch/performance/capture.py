"""The capture: warmups and measured runs under torch.profiler, read back as events (and optionally
written out as a self-describing Chrome trace).

Schedule: ``warmup_runs`` user warmups with nothing installed and the profiler off (timed: the
plain baseline); then one of

- every run traced (``operator_runs`` None): more warmups until their times are steady, a memory
  run, one profiler warmup whose events are discarded (it absorbs the profiler's buffer allocation,
  and records the input shapes each region sees), then ``measured_runs`` runs, each inside a run span;
- clock-stamped runs (lite, and by default a full capture on the CPU): no profiler. Region spans are
  clock stamps taken by the wrappers, runs are stamped around each call (after a device
  synchronisation, never one per region), and the stamps are read as run and region spans
  (`aitune.analysis.stamps`). The measured runs decide whether the warmups were enough: a first run
  still falling is set aside as a warmup (`_Settling`). A full capture then traces operators in
  ``operator_runs`` runs of their own, with no profiler warmup (the first records the input shapes):
  the measured runs' timing never pays the profiler's cost per operator, and the session's exit
  reads only those runs' events. A lite capture records the shapes in one instrumented warmup.

The Chrome trace, when asked for, is written in the background after the events are read
(`aitune.report.trace_writes`), whole or not at all.

CPU activity always; CUDA activity and synchronisation around each run when CUDA is there.

Under torch.distributed (a `RankSession`), the ranks agree on when the warmups are steady, so each
makes the same number of calls; each measured run starts after a barrier whose wait is timed outside
the run span (``barrier_wait_us``), so run *i* is the same step on every rank; and a last barrier
after the runs keeps every rank from writing its files while another's capture may still fail.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch._C._profiler import _ExperimentalConfig
from torch.autograd.profiler import record_function
from torch.profiler import ProfilerActivity, profile, schedule

from aitune.analysis.events import TraceEvents, read_trace_events
from aitune.analysis.memory import MEMORY_KEY, MEMORY_RUN, memory_section
from aitune.analysis.stamps import TIMED_SPANS_KEY, StampedSpan, stamp_table, stamped_trace
from aitune.analysis.statistics import MAX_EXTRA_WARMUPS, STEADY_WINDOW, is_steady, starts_steady
from aitune.analysis.warnings import off_thread_region_calls
from aitune.errors import CaptureError, OutputError
from aitune.markers import OPERATOR_RUN_WALLS_KEY, PLAIN_WALLS_KEY, TRACE_METADATA_KEY, run_span_name
from aitune.profiler_lines import without_profiler_lines
from aitune.report.io import gzipped, write_atomic, written_atomically
from aitune.report.trace_writes import wait_for_traces, write_later
from aitune.suggest.gain import CAPTURE_DISPATCH_KEY
from aitune.torch.calibration import DispatchProbe
from aitune.torch.performance.distributed import RankSession, trace_distributed_info
from aitune.torch.performance.instrument import InputShapes, Instrumented
from aitune.torch.performance.kineto import events_from_profiler, reads_activities
from aitune.torch.performance.regions import RegionTarget


def profiler_activities() -> list[ProfilerActivity]:
    """CPU always; CUDA when this process can use a GPU."""
    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    return activities


@contextmanager
def without_cycle_warning() -> Iterator[None]:
    """Silence the "Profiler clears events at the end of each cycle" warning torch 2.11 gives at every
    session's start (2.13 only when a session is restarted): aitune reads one cycle per session."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Warning: Profiler clears events", category=UserWarning)
        yield


ALL_RUNS = "all"
"""``operator_runs``: operators are traced in every measured run."""

DEFAULT_OPERATOR_RUNS = 1
"""Operator runs of a full capture on the CPU: the operator table and residual causes of a run
vary little from one run to the next, and each traced run costs more than two plain calls once the
profiler's session has ended and its events are read (docs/performance.md)."""


def resolve_operator_runs(requested: int | str | None) -> int | None:
    """The runs a full capture traces operators in, for `capture_trace`: None for every measured
    run, else a count of runs of their own. ``requested`` None picks `DEFAULT_OPERATOR_RUNS` on the
    CPU, and every run with CUDA or in a torch.distributed process group: device times and
    communication come only from the profiler's events, so a count is refused there."""
    if requested == ALL_RUNS:
        return None
    if requested is not None and (not isinstance(requested, int) or isinstance(requested, bool) or requested < 1):
        raise CaptureError(
            f"operator_runs must be {ALL_RUNS!r} or an integer of at least 1 (got {requested!r}); "
            "a capture without operators is mode='lite'."
        )
    if ProfilerActivity.CUDA in profiler_activities():
        needs_profiler = "with CUDA"
    elif torch.distributed.is_available() and torch.distributed.is_initialized():
        needs_profiler = "in a torch.distributed process group"
    else:
        return DEFAULT_OPERATOR_RUNS if requested is None else requested
    if requested is not None:
        raise CaptureError(
            f"operator_runs={requested} times the measured runs by a clock, which sees no device time or "
            f"communication, and this capture runs {needs_profiler}; pass operator_runs='all' or mode='lite'."
        )
    return None


def check_run_counts(warmup_runs: int, measured_runs: int) -> None:
    """Reject counts the schedule cannot honour, with the fix in the message."""
    if not isinstance(warmup_runs, int) or warmup_runs < 0:
        raise CaptureError(f"warmup_runs must be an integer of at least 0 (got {warmup_runs!r}); pass 0 or more.")
    if not isinstance(measured_runs, int) or measured_runs < 1:
        raise CaptureError(f"measured_runs must be an integer of at least 1 (got {measured_runs!r}); pass 1 or more.")


def capture_trace(
    call: Callable[[], Any],
    targets: Sequence[RegionTarget],
    *,
    warmup_runs: int,
    measured_runs: int,
    metadata: Mapping[str, Any],
    trace_path: Path | None = None,
    record_shapes: bool = False,
    with_stack: bool = False,
    operator_runs: int | None = None,
    session: RankSession | None = None,
    on_warmed_up: Callable[[int], None] | None = None,
) -> TraceEvents:
    """Run the schedule with ``targets`` instrumented; return the measured events.

    The user warmups run before anything is installed and are timed: they are the plain baseline
    the capture's overhead is judged against. Wall times (µs) join ``metadata`` as
    ``warmup_wall_times_us`` and ``run_wall_times_us``. When ``trace_path`` is given the Chrome
    trace is written there with that metadata inside, so the trace alone re-derives the profile.
    The input shapes each region saw (in the call that records them) join the entries of ``metadata["regions"]``.
    ``operator_runs`` says where operators are traced: None, in every measured run; 0, nowhere (a
    lite capture, see the module docstring); n, in n runs of their own after the measured runs,
    which are then clock-stamped (see `_capture_stamped`). ``on_warmed_up`` is told how many calls
    the whole capture makes (`planned_calls`), warmups included, once they are done, and again
    whenever a run set aside makes it grow (a progress display's total).
    ``session`` aligns the runs with the other ranks' and adds ``barrier_wait_us`` (µs before each
    run) to the metadata.
    """
    check_run_counts(warmup_runs, measured_runs)
    wait_for_traces()  # an earlier capture's trace is exported from its session before this one starts
    assert operator_runs is None or operator_runs >= 0, operator_runs
    synchronize = torch.cuda.synchronize if ProfilerActivity.CUDA in profiler_activities() else _no_sync
    all_steady = session.all_steady if session else _alone
    # The user's grad mode is kept: no_grad would switch layers such as nn.TransformerEncoderLayer to
    # their fast path and change the outputs the capture is meant to observe, not alter.
    # Runs under the profiler cannot be set aside as warmups (`_Settling`): their warmups go on until steady.
    warmup_walls = _warm_up(call, synchronize, warmup_runs, all_steady if operator_runs is None else None)
    align = _Alignment(session, measured_runs)
    planned = planned_calls(len(warmup_walls), measured_runs, operator_runs)
    settling = _Settling(all_steady if warmup_runs else None, on_warmed_up, planned)
    settling.tell()
    meta = {**metadata, "warmup_wall_times_us": warmup_walls}
    if operator_runs is None:
        return _capture_traced(
            call, targets, synchronize, measured_runs, meta, trace_path, align, record_shapes, with_stack
        )
    return _capture_stamped(
        call,
        targets,
        synchronize,
        measured_runs,
        operator_runs,
        meta,
        trace_path,
        align,
        (record_shapes, with_stack),
        settling,
    )


def planned_calls(warmups: int, measured_runs: int, operator_runs: int | None) -> int:
    """Every call a capture makes after ``warmups`` plain warmups, unless its first measured runs turn
    out to be still warming up (`_Settling`): the measured runs, and

    - traced runs (``operator_runs`` None): the memory run and the profiler's warmup;
    - a full capture's clock-stamped runs: its ``operator_runs`` (the first also records the input shapes);
    - a lite capture (0): one instrumented warmup, which records the input shapes.
    """
    if operator_runs is None:
        return warmups + 2 + measured_runs
    return warmups + measured_runs + (operator_runs or 1)


def _capture_traced(
    call: Callable[[], Any],
    targets: Sequence[RegionTarget],
    synchronize: Callable[[], None],
    measured_runs: int,
    metadata: Mapping[str, Any],
    trace_path: Path | None,
    align: _Alignment,
    record_shapes: bool,
    with_stack: bool,
    operator_pass: bool = False,
) -> TraceEvents:
    """``measured_runs`` runs under the profiler, after its warmup. An ``operator_pass`` follows
    stamped runs (`_capture_stamped`): its wall µs go in `OPERATOR_RUN_WALLS_KEY`, the calls on
    other threads are not recorded again, and its session records memory (``profile_memory``: the
    measured runs never pay for it). Its runs are not the timing, so it needs no profiler warmup: its
    first run records the input shapes instead. Measured runs under the profiler get their memory
    from one run of their own before them (`memory_run`, `MEMORY_KEY`)."""
    if not operator_pass:
        metadata = {**metadata, MEMORY_KEY: memory_run(call, targets, synchronize)}
    with (
        without_profiler_lines(),  # Kineto's profiler_start/stop lines: the CLI drops them, so does the API
        without_cycle_warning(),
        Instrumented(targets) as instrumented,
        profile(
            activities=profiler_activities(),
            schedule=_steps(measured_runs, warmup=0 if operator_pass else 1),
            # the operators' shapes give each region its work (`aitune.analysis.work`): recorded in the
            # operator runs, which the timing never sees, and where the device time is the measure
            record_shapes=record_shapes or operator_pass or ProfilerActivity.CUDA in profiler_activities(),
            with_stack=with_stack,
            profile_memory=operator_pass,
            experimental_config=trace_only_config(),
        ) as profiler,
    ):
        shapes = None
        if not operator_pass:  # the warmup is discarded: the measured runs pay nothing for the shapes
            with InputShapes(targets) as shapes:
                _timed(call, synchronize, "profiler warmup run")  # absorbs the profiler's buffer allocation
            profiler.step()
        before_runs = instrumented.off_thread.snapshot()
        run_walls = []
        for index in range(measured_runs):
            which = align.before_run(index)
            with InputShapes(targets) if operator_pass and index == 0 else nullcontext() as recorded:
                run_walls.append(_timed(call, synchronize, which, span=run_span_name(index)))
            shapes = recorded if recorded is not None else shapes
            if index < measured_runs - 1:  # no step after the last run: metadata must land while recording
                profiler.step()
        off_thread = (0, 0) if operator_pass else instrumented.off_thread.since(before_runs)
        regions = metadata.get("regions", ())
        meta = {
            **metadata,
            "regions": with_input_shapes(regions, shapes) if shapes is not None else list(regions),
            OPERATOR_RUN_WALLS_KEY if operator_pass else "run_wall_times_us": run_walls,
            **({} if operator_pass else align.metadata()),  # the document's runs are not theirs
            "warnings": _with_off_thread_calls(metadata, *off_thread),
        }
        profiler.add_metadata_json(TRACE_METADATA_KEY, json.dumps(meta))
    align.finish()
    if trace_path is not None and not reads_activities(profiler):  # the export is then the only reader: now
        return events_from_profiler(profiler, meta, export_trace(profiler, trace_path))
    events = events_from_profiler(profiler, meta)
    if trace_path is not None:  # after the events are read: the export and the reader share the session
        write_later(trace_path, lambda: export_trace(profiler, trace_path))
    return events


def _steps(runs: int, warmup: int) -> Callable[[int], Any]:
    """The profiler's schedule: ``warmup`` steps discarded, then ``runs`` recorded, each a ``ProfilerStep#``.

    An operator pass's runs are not the timing, so it needs no warmup step; torch warns that a schedule
    without one "can skew profiler results", which is about timing and is silenced here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Profiler won't be using warmup", category=UserWarning)
        return schedule(wait=0, warmup=warmup, active=runs, repeat=1)


def memory_run(
    call: Callable[[], Any], targets: Sequence[RegionTarget], synchronize: Callable[[], None]
) -> dict[str, Any]:
    """The document's ``memory`` section from one run of its own under a profiler session that records
    memory and nothing else: a capture whose measured runs are the profiler's (with CUDA, under
    torch.distributed) must not pay for it, and the section travels in their metadata (`MEMORY_KEY`)."""
    with (
        without_profiler_lines(),
        without_cycle_warning(),
        Instrumented(targets),
        profile(
            activities=profiler_activities(), profile_memory=True, experimental_config=trace_only_config()
        ) as session,
    ):
        _timed(call, synchronize, "memory run", span=run_span_name(0))
    return memory_section(events_from_profiler(session, {}), MEMORY_RUN)


def export_trace(profiler: profile, path: Path) -> bytes:
    """Write a stopped session's Chrome trace to ``path`` whole or not at all (`written_atomically`),
    gzipped at `TRACE_GZIP_LEVEL` when ``path`` ends in ``.gz``; returns the trace's JSON (plain), for
    `events_from_profiler` to read the events from.

    Kineto writes plain JSON through its own ``<name>.tmp``; torch's own gzip export copies it line by
    line into a level-9 stream, ~35× dearer than `gzipped`. Kineto reports a write it could not
    finish (a full disk, a file-size limit) only in a log line, leaving that file behind and none at
    the name: that is an `OutputError` as well, and its leftover is removed.
    """
    compress = path.suffix == ".gz"
    with written_atomically(path) as temporary:
        plain = temporary.with_suffix("") if compress else temporary
        try:
            profiler.export_chrome_trace(str(plain))
            data = plain.read_bytes() if plain.exists() else None
            if data is not None and compress:
                temporary.write_bytes(gzipped(data))
        finally:
            plain.with_name(f"{plain.name}.tmp").unlink(missing_ok=True)  # kineto's own temporary
            if compress:
                plain.unlink(missing_ok=True)
        if data is None:
            raise OutputError(
                f"cannot write {path}: the profiler could not write the trace (a full disk or a file-size limit?); "
                "free some space or write to another disk."
            )
    return data


def _capture_stamped(
    call: Callable[[], Any],
    targets: Sequence[RegionTarget],
    synchronize: Callable[[], None],
    measured_runs: int,
    operator_runs: int,
    metadata: Mapping[str, Any],
    trace_path: Path | None,
    align: _Alignment,
    options: tuple[bool, bool],
    settling: _Settling,
) -> TraceEvents:
    """The measured runs with clock-stamped spans and no profiler; then, unless ``operator_runs`` is
    0 (a lite capture), that many runs of their own under the profiler for the operators.

    The stamped runs are the timing: the profiler's cost per operator (1.2× the run time of an
    operator-heavy decoder) and its session's exit (µs per event) never touch them. Their stamps
    travel in the traced runs' metadata (`TIMED_SPANS_KEY`), so the saved trace holds both. While the
    measured runs show the run time still falling (`starts_steady`), the first is set aside as a warmup
    and one more runs (`_Settling`); the plain baseline is then taken after the runs.
    """
    stamps: list[StampedSpan] = []
    probe = DispatchProbe()
    shapes = None
    with Instrumented(targets, stamps=stamps) as instrumented:
        if not operator_runs:  # a full capture records the shapes in its first operator run instead
            with InputShapes(targets) as shapes:  # the measured runs never pay for recording them
                _timed(call, synchronize, "instrumented warmup run")
            stamps.clear()
        runs: list[_StampedRun] = []
        before_runs = []  # the off-thread calls before each run: a run set aside takes its own along
        while len(runs) < measured_runs:
            before_runs.append(instrumented.off_thread.snapshot())
            probed = probe if _probed_after(len(runs), measured_runs) else None
            runs.append(_stamped_run(call, synchronize, stamps, align.before_run(len(runs)), probed))
            if len(runs) == measured_runs and settling.set_aside_first([run.wall_us for run in runs]):
                settling.walls_us.append(runs.pop(0).wall_us)
                before_runs.pop(0)
                align.set_aside_first()
        off_thread = instrumented.off_thread.since(before_runs[0])
    for index, run in enumerate(runs):
        stamps += [*run.regions, (run_span_name(index), run.start_ns, run.end_ns, run.thread)]
    meta = {
        **metadata,
        "regions": with_input_shapes(metadata.get("regions", ()), shapes) if shapes else list(metadata["regions"]),
        "warmup_wall_times_us": [*metadata["warmup_wall_times_us"], *settling.walls_us],
        "run_wall_times_us": [run.wall_us for run in runs],
        **align.metadata(),
        "warnings": _with_off_thread_calls(metadata, *off_thread),
    }
    if settling.walls_us:  # the warmups ended before the run time was steady: a plain baseline now it is
        meta[PLAIN_WALLS_KEY] = [
            _timed(call, synchronize, f"plain baseline run {index + 1}") for index in range(STEADY_WINDOW)
        ]
    dispatch_us = [run.dispatch_us for run in runs if run.dispatch_us is not None]
    if "environment" in metadata and dispatch_us:
        meta["environment"] = {
            **metadata["environment"],
            CAPTURE_DISPATCH_KEY: round(statistics.median(dispatch_us), 3),
        }
    if operator_runs:
        meta[TIMED_SPANS_KEY] = stamp_table(stamps)
        untimed = _Alignment(align.session, operator_runs, kind="operator run")
        return _capture_traced(call, targets, synchronize, operator_runs, meta, trace_path, untimed, *options, True)
    align.finish()
    trace = stamped_trace(stamps, meta, os.getpid())
    if "distributed" in meta:  # torch's profiler writes this for a full capture; HTA finds the rank by it
        trace["distributedInfo"] = trace_distributed_info(meta["distributed"])
    if trace_path is not None:
        write_later(trace_path, lambda: write_atomic(trace_path, _encoded(trace, trace_path)))
    return read_trace_events(trace)


def _encoded(trace: Mapping[str, Any], path: Path) -> bytes:
    data = json.dumps(trace).encode()
    return gzipped(data) if path.suffix == ".gz" else data


def _warm_up(
    call: Callable[[], Any],
    synchronize: Callable[[], None],
    warmup_runs: int,
    all_steady: Callable[[bool], bool] | None,
) -> list[float]:
    """Wall µs of ``warmup_runs`` plain calls; with ``all_steady``, of more (at most `MAX_EXTRA_WARMUPS`)
    until their times are steady (`is_steady`): a run time still falling would make the measured runs
    look faster than the warmups. Without it the measured runs decide that themselves (`_Settling`).
    ``warmup_runs=0`` warms up nothing. ``all_steady`` turns this process's verdict into the job's
    (every rank must make the same calls)."""
    walls: list[float] = []
    bound = warmup_runs + (MAX_EXTRA_WARMUPS if warmup_runs and all_steady else 0)
    while len(walls) < bound and (len(walls) < warmup_runs or not (all_steady and all_steady(is_steady(walls)))):
        walls.append(_timed(call, synchronize, f"warmup run {len(walls) + 1}"))
    return walls


class _StampedRun(NamedTuple):
    """One clock-stamped measured run: its region stamps, its own, and the machine's dispatch speed after it."""

    regions: list[StampedSpan]
    start_ns: int
    end_ns: int
    thread: int
    dispatch_us: float | None  # None: not probed after this run (`_probed_after`)

    @property
    def wall_us(self) -> float:
        return (self.end_ns - self.start_ns) / 1000


def _stamped_run(
    call: Callable[[], Any],
    synchronize: Callable[[], None],
    stamps: list[StampedSpan],
    which: str,
    probe: DispatchProbe | None,
) -> _StampedRun:
    """Run once between clock stamps; the region stamps the wrappers appended to ``stamps`` move into the run."""
    mark = len(stamps)
    synchronize()
    start = time.perf_counter_ns()
    _run_workload(call, which)
    synchronize()
    end = time.perf_counter_ns()
    regions = stamps[mark:]
    del stamps[mark:]
    # the probe runs between the runs, outside their stamps: the machine's speed now
    return _StampedRun(regions, start, end, threading.get_ident(), probe() if probe is not None else None)


def _probed_after(index: int, measured_runs: int) -> bool:
    """Whether the dispatch probe times the machine after measured run ``index``: after the first, the
    middle and the last, whose median tells its speed over the runs (each probe costs a few hundred µs
    of the whole call). A run appended for one set aside as a warmup is probed too."""
    return index in {0, measured_runs // 2} or index >= measured_runs - 1


class _Settling:
    """The measured runs deciding whether the warmups were enough: while they start by falling
    (`starts_steady`), the first is set aside as one more warmup (at most `MAX_EXTRA_WARMUPS`), so a
    workload already warm costs no warmup beyond the requested ones. ``all_steady`` (None: never set
    aside, as with no warmups asked for) is the job's verdict; ``on_warmed_up`` learns each new total."""

    def __init__(
        self, all_steady: Callable[[bool], bool] | None, on_warmed_up: Callable[[int], None] | None, planned: int
    ) -> None:
        self.all_steady = all_steady
        self.on_warmed_up = on_warmed_up
        self.planned = planned
        self.walls_us: list[float] = []

    def set_aside_first(self, run_walls_us: Sequence[float]) -> bool:
        if self.all_steady is None or len(self.walls_us) >= MAX_EXTRA_WARMUPS:
            return False
        if self.all_steady(starts_steady(run_walls_us)):
            return False
        self.planned += 1 + (0 if self.walls_us else STEADY_WINDOW)  # the first one adds the plain baseline runs
        self.tell()
        return True

    def tell(self) -> None:
        if self.on_warmed_up is not None:
            self.on_warmed_up(self.planned)


def with_input_shapes(regions: Sequence[Mapping[str, Any]], recorded: InputShapes) -> list[dict[str, Any]]:
    """Copies of the region entries, each with the ``input_shapes`` its region was seen with (if
    called), ``stateful_io`` when a call took or returned an object with state (a key-value cache),
    ``call_structure_us`` (what a tuned wrapper pays per call for the arguments' and output's
    structure), ``outside_root_forward`` for a region that ran outside the root module's forward
    only, and, for a top-level region, the ``call_lengths`` of its calls in that run."""
    shapes, lengths, stateful = recorded.by_region(), recorded.call_lengths(), recorded.stateful()
    structure, outside = recorded.structure_us(), recorded.outside_root()
    entries = []
    for region in regions:
        entry = dict(region)
        if region["id"] in shapes:
            entry["input_shapes"] = shapes[region["id"]]
        if region["id"] in lengths:
            entry["call_lengths"] = lengths[region["id"]]
        if region["id"] in stateful:
            entry["stateful_io"] = True
        if region["id"] in structure:
            entry["call_structure_us"] = round(structure[region["id"]], 1)
        if region["id"] in outside:
            entry["outside_root_forward"] = True
        entries.append(entry)
    return entries


def _with_off_thread_calls(metadata: Mapping[str, Any], calls: int, threads: int) -> list[dict[str, Any]]:
    """The warnings of ``metadata`` plus `off_thread_region_calls`: they travel in the trace, so a re-analysis
    of a saved trace reports the off-thread calls too (the trace holds no span of them)."""
    return [*metadata.get("warnings", ()), *off_thread_region_calls(calls, threads)]


def _timed(call: Callable[[], Any], synchronize: Callable[[], None], which: str, span: str | None = None) -> float:
    """Wall µs of one call, device work included; inside a run span when ``span`` is given."""
    synchronize()
    start = time.perf_counter_ns()
    with record_function(span) if span is not None else nullcontext():
        _run_workload(call, which)
        synchronize()
    return (time.perf_counter_ns() - start) / 1000


def _run_workload(call: Callable[[], Any], which: str) -> None:
    try:
        call()
    except Exception as error:
        raise CaptureError(
            f"the profiled workload raised {type(error).__name__} during the {which}: {error}"
        ) from error


def trace_only_config() -> Any:
    """torch's ``trace_only`` session config where it has one, else None (the default session).

    The capture reads the raw activities (`events_from_profiler`) and never torch's Python event
    objects, so building them when the session stops is wasted. Skipping it took the session's
    exit after 2,500 module calls from 0.47 s to 0.40 s (medians of 7 interleaved, torch 2.13, a
    machine at load 7); the trace export and the metadata are unaffected.
    """
    try:
        return _ExperimentalConfig(trace_only=True)
    except TypeError:  # a torch whose config has no trace_only
        return None


def _no_sync() -> None:
    return None


def _alone(steady: bool) -> bool:
    return steady


class _Alignment:
    """The barriers before each of ``runs`` runs of ``kind`` (the operator runs are aligned too) and
    their waits; nothing without a session (a single process)."""

    def __init__(self, session: RankSession | None, runs: int, kind: str = "measured run") -> None:
        self.session = session
        self.runs = runs
        self.kind = kind
        self.waits_us: list[float] = []

    def before_run(self, index: int) -> str:
        """Wait for the other ranks before run ``index``; the run's name for messages."""
        which = f"{self.kind} {index + 1} of {self.runs}"
        if self.session is not None:
            self.waits_us.append(self.session.barrier(which))
        return which

    def set_aside_first(self) -> None:
        """The first run became a warmup: its wait goes with it."""
        if self.waits_us:
            self.waits_us.pop(0)

    def metadata(self) -> dict[str, Any]:
        return {"barrier_wait_us": self.waits_us} if self.session is not None else {}

    def finish(self) -> None:
        if self.session is not None:
            self.session.finish()
