"""Phases of a generate: each run split into encoder, prefill and decode, with time to first token
and time per output token.

A generate-like run calls one module once per new token, the *step region* (Hugging Face
``generate``'s ``model`` or ``decoder``, or the module a hand-written loop calls): its first call
reads the prompt (prefill), each later call adds one token (decode); an encoder-decoder model runs
its encoder once before the first step. The split is found on each run's timeline from the region
calls at the level the document lists (`RunCalls`: the regions below the spanning ones, or the
topmost), and the evidence says whether the run is generate-like at all (`find_split`): the tokens
each call of the step region took, recorded at capture (``regions[].call_lengths``), or, under a
``generate`` method, the order of its calls.

A phase is the stretch of the run between two step calls' starts, so the phases tile the run: the
encoder phase from the run's start to the first step, prefill from there to the second step (from
the run's start when there is no encoder), decode to the run's end. The first token is out when the
second step starts: time to first token is the run's start to the end of prefill. Each decode
token's time is one step's start to the next one's (the last one's to the end of the spanning
call). Times are the host's (CPU) timeline.

Invariant: per run, Σ phase times = the run's CPU time; per phase, Σ region fractions + residual
fraction = 1.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, NamedTuple

from aitune.analysis.events import Span, TraceEvents
from aitune.analysis.shares import fraction
from aitune.analysis.statistics import percentile
from aitune.markers import region_path, span_run_index

ENCODER, PREFILL, DECODE = "encoder", "prefill", "decode"
PHASE_NAMES = (ENCODER, PREFILL, DECODE)

BY_INPUT_LENGTHS = "input_lengths"
"""``phase_split.method``: the step region's calls took the prompt first, then fewer tokens (or one more each)."""
BY_CALL_ORDER = "call_order"
"""``phase_split.method``: under a ``generate`` method, the first call of the step region is the prefill."""

GENERATE_METHOD = "generate"
"""The entry method whose calls are a generate even when the step's token counts cannot tell (an encoder-decoder's
decoder takes one token from its first call)."""


class Call(NamedTuple):
    """One call of a region at the document's level, on the run's timeline (µs)."""

    region_id: str
    start_us: float
    end_us: float


@dataclass(frozen=True)
class RunCalls:
    """The calls of one run at the level its ``regions`` list, in start order."""

    run_index: int
    start_us: float
    end_us: float
    within_end_us: float  # end of the innermost spanning region's call; the run's end without one
    calls: tuple[Call, ...]

    def of(self, region: str) -> list[Call]:
        return [call for call in self.calls if call.region_id == region]


@dataclass(frozen=True)
class PhaseSplit:
    """How the runs split into phases, and the evidence it was decided on (the document's ``phase_split``)."""

    step_region: str
    method: str  # BY_INPUT_LENGTHS or BY_CALL_ORDER
    basis: str  # the evidence, in a sentence every reader shows
    encoder_regions: tuple[str, ...]  # regions called before the first step: the encoder phase's
    within: str | None  # the spanning region the steps run under
    prompt_tokens: int | None  # the first step call's tokens, when recorded

    @property
    def names(self) -> tuple[str, ...]:
        return PHASE_NAMES if self.encoder_regions else PHASE_NAMES[1:]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "method": self.method,
            "basis": self.basis,
            "step_region": self.step_region,
            "phases": list(self.names),
        }
        if self.encoder_regions:
            out["encoder_regions"] = list(self.encoder_regions)
        if self.within is not None:
            out["within"] = self.within
        if self.prompt_tokens is not None:
            out["prompt_tokens"] = self.prompt_tokens
        return out


def run_calls(events: TraceEvents, spanning: Sequence[str]) -> list[RunCalls]:
    """Every run's calls at the level below the ``spanning`` chain (the topmost regions without one), by run index.

    A region span's place is its node in the model's region tree (`aitune.analysis.membership`)."""
    found = []
    for view in events.threads.values():
        runs = [events.runs[index] for index in view.runs]
        run_of, node_of = view.region_runs.tolist(), view.region_nodes.tolist()
        placed: list[list[tuple[Span, tuple[str, ...]]]] = [[] for _ in runs]
        for index in view.region_order.tolist():  # parents first
            if run_of[index] >= 0 and node_of[index] >= 0:
                path = events.region_tree[node_of[index]][1]
                placed[run_of[index]].append((events.regions[view.regions[index]], path))
        for run, spans in zip(runs, placed, strict=True):
            found.append(_level_calls(run, spans, tuple(spanning)))
    return sorted(found, key=lambda run: run.run_index)


def _level_calls(run: Span, spans: Sequence[tuple[Span, tuple[str, ...]]], spanning: tuple[str, ...]) -> RunCalls:
    """The calls among ``spans`` (one run's region spans with their tree paths, parents first) whose enclosing
    regions are ``spanning``."""
    calls, within_end = [], None
    for span, chain in spans:
        if chain == spanning:
            within_end = max(within_end or 0.0, span.end_us)
        elif chain[:-1] == spanning:
            calls.append(Call(chain[-1], span.start_us, span.end_us))
    return RunCalls(
        run_index=span_run_index(run.name),
        start_us=run.start_us,
        end_us=run.end_us,
        within_end_us=run.end_us if within_end is None else min(within_end, run.end_us),
        calls=tuple(sorted(calls, key=lambda call: call.start_us)),
    )


def find_split(
    runs: Sequence[RunCalls], spanning: Sequence[str], call_lengths: Mapping[str, Sequence[int | None]]
) -> PhaseSplit | None:
    """The phase split of generate-like ``runs``; None when they are not generate-like.

    The step region is the region called most often in every run (the first called of those that
    tie: ``model`` before ``lm_head``). The runs are generate-like when its calls' token counts
    (``call_lengths``, one per call of a run) show a prompt read first and then one token at a time
    (a cache), or a sequence growing by one token per call (no cache), or else when the steps run
    under a ``generate`` method; a loop whose calls all take the same input (a denoising loop) is not,
    nor a run that makes one token.
    """
    step = _step_region(runs)
    if step is None:
        return None
    within = spanning[-1] if spanning else None
    counts = {len(run.of(step)) for run in runs}
    if min(counts) < 2:  # one token: nothing to split, the run is its own time to first token
        return None
    lengths = list(call_lengths.get(step, ()))
    pattern = _token_pattern(lengths) if counts == {len(lengths)} else None
    name = region_path(step)
    if pattern is not None:
        method, basis = BY_INPUT_LENGTHS, f"{name} took {lengths[0]} tokens in its first call and {pattern}"
    elif within is not None and region_path(within).rpartition(".")[2] == GENERATE_METHOD:
        method = BY_CALL_ORDER
        basis = (
            f"under {region_path(within)} each call of {name} makes one token: the first is the prefill (call order)"
        )
    else:
        return None
    return PhaseSplit(
        step_region=step,
        method=method,
        basis=basis,
        encoder_regions=_before_first_step(runs, step),
        within=within,
        prompt_tokens=lengths[0] if lengths and counts == {len(lengths)} else None,
    )


def _step_region(runs: Sequence[RunCalls]) -> str | None:
    """The region called most often in every run, the first called of those that tie; None if runs disagree."""
    found = set()
    for run in runs:
        counts = Counter(call.region_id for call in run.calls)
        if not counts:
            return None
        most = max(counts.values())
        found.add(next(call.region_id for call in run.calls if counts[call.region_id] == most))
    return found.pop() if len(found) == 1 else None


def _token_pattern(lengths: Sequence[int | None]) -> str | None:
    """How the tokens of a step region's calls read as a generate, in words; None when they do not."""
    if len(lengths) < 2 or any(length is None for length in lengths):
        return None
    first, rest = lengths[0], [length for length in lengths[1:] if length is not None]
    assert first is not None
    if first > max(rest):
        return f"{max(rest)} in each later one (a cache): the first call is the prefill, the later ones decode"
    if all(later == earlier + 1 for earlier, later in pairwise(lengths)):  # type: ignore[operator]
        return "one more in each later one (no cache: each call reads the whole sequence again)"
    return None


def _before_first_step(runs: Sequence[RunCalls], step: str) -> tuple[str, ...]:
    """The regions called before the step region's first call in every run: the encoder phase's."""
    per_run = []
    for run in runs:
        first = run.of(step)[0].start_us
        per_run.append(dict.fromkeys(call.region_id for call in run.calls if call.start_us < first))
    common = [region for region in per_run[0] if all(region in regions for regions in per_run)] if per_run else []
    return tuple(common)


@dataclass(frozen=True)
class Phase:
    """One phase of one run: its stretch of the run's timeline and the calls that started in it."""

    name: str
    start_us: float
    end_us: float
    steps: int  # step-region calls (tokens made) in it
    calls: tuple[Call, ...]

    @property
    def duration_us(self) -> float:
        return max(0.0, self.end_us - self.start_us)

    def to_dict(self, run_us: float) -> dict[str, Any]:
        """The phase as the document holds it: its share of the run, each region's share of the phase, the residual."""
        regions: dict[str, list[float]] = {}
        for call in self.calls:
            totals = regions.setdefault(call.region_id, [0, 0.0])
            totals[0] += 1
            totals[1] += call.end_us - call.start_us
        duration = self.duration_us
        outside = max(0.0, duration - sum(time for _, time in regions.values()))
        return {
            "name": self.name,
            "cpu_time_us": duration,
            "cpu_time_fraction": fraction(duration, run_us),
            "steps": self.steps,
            "regions": [
                {
                    "region_id": region,
                    "calls": int(calls),
                    "cpu_time_us": time,
                    "cpu_time_fraction": fraction(time, duration),
                }
                for region, (calls, time) in regions.items()
            ],
            "residual": {"cpu_time_us": outside, "cpu_time_fraction": fraction(outside, duration)},
        }


def split_run(run: RunCalls, split: PhaseSplit) -> list[Phase]:
    """The phases of one run, in order; they tile ``[run.start_us, run.end_us]``."""
    steps = run.of(split.step_region)
    bounds = [run.start_us]
    names = []
    if split.encoder_regions:
        names.append(ENCODER)
        bounds.append(steps[0].start_us)
    names.append(PREFILL)
    if len(steps) > 1:
        names.append(DECODE)
        bounds.append(steps[1].start_us)
    bounds.append(run.end_us)
    made = {ENCODER: 0, PREFILL: 1, DECODE: len(steps) - 1}
    phases = []
    for name, start, end in zip(names, bounds[:-1], bounds[1:], strict=True):
        last = end == run.end_us
        inside = tuple(call for call in run.calls if start <= call.start_us and (last or call.start_us < end))
        phases.append(Phase(name, start, end, made[name], inside))
    return phases


def generation_figures(run: RunCalls, split: PhaseSplit) -> dict[str, Any]:
    """Tokens made, time to first token, time per output token (median, p90 over decode steps) and tokens per second."""
    starts = [call.start_us for call in run.of(split.step_region)]
    run_us = run.end_us - run.start_us
    first_out = starts[1] if len(starts) > 1 else run.end_us
    figures: dict[str, Any] = {
        "output_tokens": len(starts),
        "ttft_us": max(0.0, first_out - run.start_us),
        "tokens_per_second": len(starts) / run_us * 1e6 if run_us > 0 else 0.0,
    }
    token_times = decode_token_times(starts, run.within_end_us)
    if token_times:
        figures["time_per_output_token_us"] = {
            "median": statistics.median(token_times),
            "p90": percentile(token_times, 90),
        }
        if len(token_times) >= 2:
            figures["time_per_output_token_us"]["growth"] = growth(token_times)
        decode_us = run.end_us - starts[1]
        figures["decode_tokens_per_second"] = len(token_times) / decode_us * 1e6 if decode_us > 0 else 0.0
    return figures


def growth(token_times: Sequence[float]) -> float:
    """The later half of the decode tokens' median time ÷ the earlier half's (1: steady; above: a growing cost
    per token, such as attention over a growing cache); 0 when the earlier half took no time.

    >>> growth([10.0, 10.0, 20.0, 20.0])
    2.0
    """
    half = len(token_times) // 2
    early, late = statistics.median(token_times[:half]), statistics.median(token_times[len(token_times) - half :])
    return late / early if early > 0 else 0.0


def decode_token_times(step_starts: Sequence[float], end_us: float) -> list[float]:
    """Each decode token's µs: one step's start to the next one's, the last to ``end_us``; [] without decode steps.

    >>> decode_token_times([0.0, 50.0, 60.0, 72.0], 80.0)
    [10.0, 12.0, 8.0]
    """
    bounds = [*step_starts[1:], max(end_us, step_starts[-1])] if step_starts else []
    return [max(0.0, later - earlier) for earlier, later in pairwise(bounds)]


def recorded_lengths(regions: Sequence[Mapping[str, Any]]) -> dict[str, list[int | None]]:
    """The ``call_lengths`` of each region entry (a capture's metadata, untrusted) that holds a well-formed list."""
    found = {}
    for region in regions:
        lengths = region.get("call_lengths") if isinstance(region, Mapping) else None
        if isinstance(lengths, list) and all(
            length is None or (type(length) is int and length >= 0) for length in lengths
        ):
            found[str(region.get("id"))] = lengths
    return found


def run_phases(
    events: TraceEvents, spanning: Sequence[str], regions: Sequence[Mapping[str, Any]]
) -> tuple[PhaseSplit | None, dict[int, dict[str, Any]]]:
    """The split of ``events``' runs and, per run index, its ``phases`` and ``generation`` keys; (None, {}) when
    the runs are not generate-like. ``regions``: the capture's region entries, with their ``call_lengths``."""
    runs = run_calls(events, spanning)
    split = find_split(runs, spanning, recorded_lengths(regions)) if runs else None
    if split is None:
        return None, {}
    out = {}
    for run in runs:
        run_us = run.end_us - run.start_us
        out[run.run_index] = {
            "phases": [phase.to_dict(run_us) for phase in split_run(run, split)],
            "generation": generation_figures(run, split),
        }
    return split, out
