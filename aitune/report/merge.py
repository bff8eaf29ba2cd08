"""Merge the per-rank profiles of one distributed run into one document (no torch).

A distributed capture writes ``DIR/rank<r>/profile.json`` per rank ``r`` of ``world_size``, each
an ordinary profile plus a ``distributed`` block, its run *i* the same step on every rank (a
barrier aligns them; ``runs[i].barrier_wait_us`` is the wait before it).

The merged document reads like one capture to every reader (report, Markdown, compare, suggest,
viewer): a step ends when its last rank ends, so its run *i* is run *i* of the rank that took
longest in that step, copied whole (timing, regions, residual, tree) with that ``rank`` added.
Per run, then, Σ region fractions + residual = 1 holds as it did on that rank, and the medians
every reader shows are the medians of the step times. The operator table, target and
environment are those of the critical rank (the one with the slowest median step). What only a
merge knows is under ``ranks``: each rank's run and region times, per region the slowest rank and
the load imbalance (max ÷ median of the ranks' medians), and the stragglers (`stragglers`), judged
on each rank's time outside communication (`rank_compute`).

Every time here is the ``cpu`` domain, which every capture has: the host's clock of each step.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from aitune.analysis.statistics import summarize
from aitune.analysis.stragglers import Straggler, imbalance, slowest, stragglers
from aitune.analysis.warnings import ProfileWarning, rank_straggler, warning
from aitune.errors import ProfileError
from aitune.report.document import ProfileDoc
from aitune.report.headline import RESIDUAL_LABEL
from aitune.report.io import load
from aitune.report.model import UNSET, Distributed, Profile, ProfileLike, Run, as_profile, given, json_form
from aitune.report.samples import (
    communication_us,
    region_communication_samples,
    region_samples,
    residual_samples,
    run_samples,
)

DOMAIN = "cpu"
PROFILE_NAME = "profile.json"
MERGED_FOLDER = "merged"
"""Where ``aitune-profile merge DIR`` writes by default: ``DIR/merged/profile.json`` and ``profile.md``."""

RANK_FOLDER = re.compile(r"rank(0|[1-9][0-9]*)")
"""``rank<r>``, ``r`` unpadded: ``rank01`` beside ``rank1`` would be two folders for one rank."""

PER_RANK_DOC_KEYS = ("distributed", "trace_file", "capture_overhead", "warmup", "statistics")
"""Keys of the critical rank's document that describe that rank alone; the merged document drops them."""


@dataclass(frozen=True)
class RankProfile:
    """One rank's profile document and the file it came from (named in every error)."""

    rank: int
    path: Path
    doc: ProfileLike

    @cached_property
    def record(self) -> Profile:
        """The document as the model reads it: converted once, for every reader of this rank."""
        return as_profile(self.doc)


def read_rank_profiles(folder: Path) -> list[RankProfile]:
    """Every rank's profile of ``folder`` at once, by rank (see `rank_profiles`, which reads one at a time)."""
    return list(rank_profiles(folder))


def rank_profiles(folder: Path) -> Iterator[RankProfile]:
    """Load ``folder/rank<r>/profile.json`` for every ``rank*`` entry, by rank, one at a time: a merge of
    1,024 ranks holds one rank's document at a time. `ProfileError` names the entry; every entry's name
    is checked before the first file is read."""
    for rank, path in _ranked_paths(folder):
        yield RankProfile(rank, path, load(path))


def rank_profile_paths(folder: Path) -> list[Path]:
    """The path of every rank's profile in ``folder``, by rank; `ProfileError` as `rank_profiles`."""
    return [path for _, path in _ranked_paths(folder)]


def _ranked_paths(folder: Path) -> list[tuple[int, Path]]:
    if not folder.is_dir():
        raise ProfileError(f"{folder}: no such folder; name the folder a distributed capture wrote (rank0/, …).")
    entries = sorted(entry for entry in folder.iterdir() if entry.name.startswith("rank"))
    if not entries:
        raise ProfileError(
            f"{folder} holds no rank<r>/{PROFILE_NAME}; merge reads the folder that `aitune-profile capture "
            "--out DIR` writes under torchrun."
        )
    ranked = []
    for entry in entries:
        match = RANK_FOLDER.fullmatch(entry.name)
        if match is None or not entry.is_dir():
            raise ProfileError(f"{entry}: not a rank folder (rank<r>, r = 0, 1, … unpadded); move it out of {folder}.")
        ranked.append((int(match[1]), entry / PROFILE_NAME))
    return sorted(ranked)


def merge_profiles(profiles: Iterable[RankProfile]) -> ProfileDoc:
    """One document for the ranks of one run (see the module docstring); `ProfileError` when they are not one run.

    ``profiles`` is read once, in rank order (a sequence is sorted first): each rank's document is
    reduced to its times as it arrives, so memory grows with what the merged document holds, not with
    the ranks' documents (`rank_profiles` yields them one at a time).
    """
    fold = _RankFold()
    for profile in sorted(profiles, key=lambda profile: profile.rank) if isinstance(profiles, Sequence) else profiles:
        fold.add(profile)
    return fold.merged()


@dataclass(frozen=True)
class _FirstRank:
    """What every later rank is checked against: the lowest rank's path, world and shape."""

    path: Path
    world_size: int
    run_count: int
    spanning: list[str]
    region_ids: set[str]
    distributed: Distributed


@dataclass
class _RankFold:
    """The merge as a fold over the ranks in order: per rank only its times, entry and warnings are kept;
    of the documents' records, the critical rank's so far and, per run index, the slowest rank's run."""

    first: _FirstRank | None = None
    seen: dict[int, Path] = field(default_factory=dict)
    times: list[list[float]] = field(default_factory=list)
    regions: list[dict[str, list[float]]] = field(default_factory=list)
    computes: list[tuple[list[float], dict[str, list[float]]]] = field(default_factory=list)
    entries: list[dict[str, Any]] = field(default_factory=list)
    step_runs: list[tuple[float, int, Run]] = field(default_factory=list)
    critical: tuple[float, int, Profile] | None = None
    grouped_warnings: dict[tuple[str, str], tuple[str, list[int]]] = field(default_factory=dict)

    def add(self, profile: RankProfile) -> None:
        self.check(profile)
        record, index = profile.record, len(self.times)
        times = run_samples(record, DOMAIN)
        regions = rank_regions(record)
        self.times.append(times)
        self.regions.append(regions)
        self.computes.append(rank_compute(record, regions))
        self.entries.append(rank_entry(profile, times, regions))
        for item in record.warnings:
            self.grouped_warnings.setdefault((item.code, item.source), (item.message, []))[1].append(index)
        runs = record.runs
        if not self.step_runs:
            self.step_runs = [(time, index, run) for time, run in zip(times, runs, strict=True)]
        else:  # a step's rank is its slowest, the lowest rank among equals
            self.step_runs = [
                (time, index, run) if time > kept[0] else kept
                for time, run, kept in zip(times, runs, self.step_runs, strict=True)
            ]
        median = statistics.median(times)
        if self.critical is None or median > self.critical[0]:  # `slowest`: the lowest rank among equals
            self.critical = (median, index, record)

    def check(self, profile: RankProfile) -> None:
        """`ProfileError` unless ``profile`` is the next rank of the run the earlier ones began."""
        distributed = _distributed(profile)
        rank, world_size = distributed.rank, distributed.world_size
        if rank in self.seen:
            raise ProfileError(
                f"{profile.path} and {self.seen[rank]} both say distributed.rank {rank}; each rank's profile "
                "belongs in its own rank<r>/ folder — copy the folders as the capture wrote them."
            )
        if rank != profile.rank:
            raise ProfileError(
                f"{profile.path}: its distributed.rank is {rank}, not {profile.rank}; move it to rank{rank}/."
            )
        self.seen[rank] = profile.path
        record = profile.record
        region_ids = {region.id for region in record.regions}
        spanning = given(record.spanning_regions, [])
        if self.first is None:
            self.first = _FirstRank(profile.path, world_size, len(record.runs), spanning, region_ids, distributed)
        first = self.first
        _same_as_first(profile, first.path, "world_size", world_size, first.world_size)
        _same_as_first(profile, first.path, "measured run count", len(record.runs), first.run_count)
        _same_as_first(profile, first.path, "spanning regions", spanning, first.spanning)
        if record.scenarios is not UNSET:
            raise ProfileError(f"{profile.path}: merge reads single-input profiles; capture one scenario per run.")
        if not record.runs:
            raise ProfileError(f"{profile.path} has no measured runs; capture the run again.")
        if region_ids != first.region_ids:
            differ = sorted(region_ids ^ first.region_ids)
            raise ProfileError(
                f"{profile.path} and {first.path} observed different regions ({', '.join(differ[:3])}); the ranks of "
                "one run execute the same model code — capture them together again."
            )

    def check_world(self) -> _FirstRank:
        """`ProfileError` unless the ranks seen are 0..world_size-1 exactly."""
        first = self.first
        if first is None:
            raise ProfileError("no rank profiles to merge; name the folder a distributed capture wrote.")
        # Sized by the folders found, never by the world_size a file states (10¹² would be 20 GB of set).
        missing = [rank for rank in range(min(len(self.seen) + 1, first.world_size)) if rank not in self.seen]
        extra = sorted(rank for rank in self.seen if rank >= first.world_size)
        if missing or extra:
            rank = (missing or extra)[0]
            where = "is missing" if missing else "is outside the world"
            raise ProfileError(
                f"{first.path.parent.parent / f'rank{rank}' / PROFILE_NAME} {where}: {first.path} says world_size "
                f"{first.world_size}; merge the folder with "
                f"rank0/ … rank{first.world_size - 1}/ exactly, as the capture wrote it."
            )
        return first

    def merged(self) -> ProfileDoc:
        first = self.check_world()  # ranks 0..n-1, checked: index r of every list is rank r
        assert self.critical is not None
        _, critical, critical_record = self.critical
        found = stragglers(
            {rank: steps for rank, (steps, _) in enumerate(self.computes)},
            {rank: by_region for rank, (_, by_region) in enumerate(self.computes)},
        )
        step_ranks = [rank for _, rank, _ in self.step_runs]
        # The critical rank's document in its JSON form, less its per-rank keys; its runs and warnings give way,
        # in place, to the steps' slowest runs and the ranks' warnings.
        kept = json_form(critical_record)
        merged = {
            **{key: value for key, value in kept.items() if key not in PER_RANK_DOC_KEYS},
            "runs": [{**json_form(run), "rank": rank} for _, rank, run in self.step_runs],
            "statistics": {"runs": {f"{DOMAIN}_time_us": summarize([time for time, _, _ in self.step_runs])}},
            "warnings": rank_warnings(self.grouped_warnings)
            + [
                rank_straggler(
                    s.rank, s.own_us, s.others_us, None if s.region == RESIDUAL_LABEL else s.region, s.region_excess_us
                )
                for s in found
            ],
            "ranks": ranks_section(first.distributed, self, step_ranks, critical, found),
        }
        return merged  # type: ignore[return-value]


def rank_regions(doc: ProfileLike) -> dict[str, list[float]]:
    """One rank's time per run (µs) of every region, nested ones included, then of the residual (`RESIDUAL_LABEL`)."""
    record = as_profile(doc)
    samples = {region: list(values) for region, values in region_samples(record, DOMAIN).values()}
    return {**samples, RESIDUAL_LABEL: residual_samples(record, DOMAIN)}


def rank_compute(
    doc: ProfileLike, regions: Mapping[str, Sequence[float]]
) -> tuple[list[float], dict[str, list[float]]]:
    """One rank's time outside communication per run (µs): of its steps, and of each of its ``regions``
    (`rank_regions`, the residual included), which is what a straggler is judged on.

    Where the ranks meet in a collective, the fast ones wait inside it for the slow one, so step and
    region times even out across ranks; the time outside communication does not. A capture without
    communication has none to take out.
    """
    record = as_profile(doc)
    runs = record.runs
    steps = [time - communication_us(run) for time, run in zip(run_samples(record, DOMAIN), runs, strict=True)]
    in_flight = dict(region_communication_samples(record).values())
    in_flight[RESIDUAL_LABEL] = [communication_us(run.residual) for run in runs]
    compute = {
        region: [time - busy for time, busy in zip(times, in_flight.get(region, [0.0] * len(runs)), strict=True)]
        for region, times in regions.items()
    }
    return steps, compute


def rank_warnings(grouped: Mapping[tuple[str, str], tuple[str, Sequence[int]]]) -> list[ProfileWarning]:
    """Each rank's warnings, one per code and source (``grouped``: the lowest rank's message and every rank
    that has it, by code and source), the message naming every rank that has it."""
    found = []
    for (code, source), (message, ranks) in grouped.items():
        also = f" (also rank(s) {', '.join(map(str, ranks[1:]))})" if ranks[1:] else ""
        found.append(warning(code, f"rank {ranks[0]}{also}: {message}", source))
    return found


def ranks_section(
    first: Distributed,
    fold: _RankFold,
    step_ranks: Sequence[int],
    critical: int,
    found: Sequence[Straggler],
) -> dict[str, Any]:
    """The merged document's ``ranks`` block (see ``profile.schema.json``); ``first`` is rank 0's ``distributed``."""
    regions = fold.regions
    run_medians = [statistics.median(samples) for samples in fold.times]
    return {
        "world_size": first.world_size,
        "backend": given(first.backend, ""),
        "domain": DOMAIN,
        "critical_rank": critical,
        "step_ranks": list(step_ranks),
        "run_time": spread_across_ranks(run_medians),
        "regions": [
            {"region_id": region, **spread_across_ranks([statistics.median(rank[region]) for rank in regions])}
            for region in regions[0]
        ],
        "per_rank": fold.entries,
        "stragglers": [
            {
                "rank": s.rank,
                "median_us": s.own_us,
                "others_median_us": s.others_us,
                "region_id": s.region,
                "region_excess_us": s.region_excess_us,
            }
            for s in found
        ],
    }


def spread_across_ranks(medians: Sequence[float]) -> dict[str, Any]:
    """The ranks' medians (µs, by rank), the slowest rank and the imbalance (absent when the median is 0)."""
    ratio = imbalance(medians)
    return {
        "median_us": list(medians),
        "slowest_rank": slowest(medians),
        **({"imbalance": ratio} if ratio is not None else {}),
    }


def rank_entry(profile: RankProfile, times: Sequence[float], regions: Mapping[str, Sequence[float]]) -> dict[str, Any]:
    """One rank's line of ``ranks.per_rank``: who it was, where its file lies, and its per-run times (µs)."""
    record, distributed = profile.record, _distributed(profile)
    where = {"local_rank": distributed.local_rank, "host_index": distributed.host_index, "backend": distributed.backend}
    waits = [run.barrier_wait_us for run in record.runs]
    return {
        "rank": profile.rank,
        "source": f"{profile.path.parent.name}/{profile.path.name}",
        "run_times_us": list(times),
        "region_times_us": {region: list(values) for region, values in regions.items()},
        **{key: value for key, value in where.items() if value is not UNSET},
        **({"barrier_wait_us": waits} if all(wait is not UNSET for wait in waits) else {}),
    }


def _distributed(profile: RankProfile) -> Distributed:
    """The rank's ``distributed`` block (the model holds rank >= 0, world_size >= 1); `ProfileError` without one."""
    distributed = profile.record.distributed
    if distributed is UNSET:
        raise ProfileError(
            f"{profile.path}: no distributed block with rank and world_size; merge reads the per-rank profiles "
            "of a capture under torchrun."
        )
    return distributed


def _same_as_first(profile: RankProfile, first: Path, what: str, value: Any, expected: Any) -> None:
    if value != expected:
        raise ProfileError(
            f"{profile.path} has {what} {value} but {first} has {expected}; the ranks of one run share it — "
            "merge the folder of one capture, or capture again."
        )
