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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aitune.analysis.statistics import summarize
from aitune.analysis.stragglers import Straggler, imbalance, slowest, stragglers
from aitune.analysis.warnings import ProfileWarning, rank_straggler, warning
from aitune.compare import communication_us, region_communication_samples, region_samples, residual_samples, run_samples
from aitune.errors import ProfileError
from aitune.report.document import ProfileDoc
from aitune.report.headline import RESIDUAL_LABEL
from aitune.report.io import load

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
    doc: Mapping[str, Any]


def read_rank_profiles(folder: Path) -> list[RankProfile]:
    """Load ``folder/rank<r>/profile.json`` for every ``rank*`` entry, by rank; `ProfileError` names the entry."""
    if not folder.is_dir():
        raise ProfileError(f"{folder}: no such folder; name the folder a distributed capture wrote (rank0/, …).")
    entries = sorted(entry for entry in folder.iterdir() if entry.name.startswith("rank"))
    if not entries:
        raise ProfileError(
            f"{folder} holds no rank<r>/{PROFILE_NAME}; merge reads the folder that `aitune-profile capture "
            "--out DIR` writes under torchrun."
        )
    profiles = []
    for entry in entries:
        match = RANK_FOLDER.fullmatch(entry.name)
        if match is None or not entry.is_dir():
            raise ProfileError(f"{entry}: not a rank folder (rank<r>, r = 0, 1, … unpadded); move it out of {folder}.")
        profiles.append(RankProfile(int(match[1]), entry / PROFILE_NAME, load(entry / PROFILE_NAME)))
    return sorted(profiles, key=lambda profile: profile.rank)


def check_one_run(profiles: Sequence[RankProfile]) -> None:
    """`ProfileError` unless the profiles are the ranks 0..n-1 of one run, each once, with the same runs and regions."""
    seen: dict[int, RankProfile] = {}
    for profile in profiles:
        rank = _rank_and_world_size(profile)[0]
        if rank in seen:
            raise ProfileError(
                f"{profile.path} and {seen[rank].path} both say distributed.rank {rank}; each rank's profile "
                "belongs in its own rank<r>/ folder — copy the folders as the capture wrote them."
            )
        if rank != profile.rank:
            raise ProfileError(
                f"{profile.path}: its distributed.rank is {rank}, not {profile.rank}; move it to rank{rank}/."
            )
        seen[rank] = profile
    first = profiles[0]
    world_size = _rank_and_world_size(first)[1]
    for profile in profiles:
        _same_as_first(profile, first, "world_size", _rank_and_world_size(profile)[1], world_size)
        _same_as_first(profile, first, "measured run count", len(profile.doc["runs"]), len(first.doc["runs"]))
        spanning = profile.doc.get("spanning_regions", [])
        _same_as_first(profile, first, "spanning regions", spanning, first.doc.get("spanning_regions", []))
        if "scenarios" in profile.doc:
            raise ProfileError(f"{profile.path}: merge reads single-input profiles; capture one scenario per run.")
        if not profile.doc["runs"]:
            raise ProfileError(f"{profile.path} has no measured runs; capture the run again.")
    # Sized by the folders found, never by the world_size a file states (10¹² would be 20 GB of set).
    missing = next((rank for rank in range(len(seen) + 1) if rank not in seen), None)
    extra = sorted(rank for rank in seen if rank >= world_size)
    if (missing is not None and missing < world_size) or extra:
        lacking = missing is not None and missing < world_size
        rank = missing if lacking else extra[0]
        where = "is missing" if lacking else "is outside the world"
        raise ProfileError(
            f"{first.path.parent.parent / f'rank{rank}' / PROFILE_NAME} {where}: {first.path} says world_size "
            f"{world_size}; merge the folder with "
            f"rank0/ … rank{world_size - 1}/ exactly, as the capture wrote it."
        )
    ids = _region_ids(first.doc)
    for profile in profiles:
        if _region_ids(profile.doc) != ids:
            differ = sorted(_region_ids(profile.doc) ^ ids)
            raise ProfileError(
                f"{profile.path} and {first.path} observed different regions ({', '.join(differ[:3])}); the ranks of "
                "one run execute the same model code — capture them together again."
            )


def merge_profiles(profiles: Sequence[RankProfile]) -> ProfileDoc:
    """One document for the ranks of one run (see the module docstring); `ProfileError` when they are not one run."""
    if not profiles:
        raise ProfileError("no rank profiles to merge; name the folder a distributed capture wrote.")
    profiles = sorted(profiles, key=lambda profile: profile.rank)
    check_one_run(profiles)
    docs = [profile.doc for profile in profiles]  # ranks 0..n-1, checked: docs[r] is rank r
    times = [run_samples(doc, DOMAIN) for doc in docs]
    step_ranks = [max(range(len(docs)), key=lambda rank: times[rank][index]) for index in range(len(times[0]))]
    medians = [statistics.median(samples) for samples in times]
    critical = slowest(medians)
    merged: dict[str, Any] = {key: value for key, value in docs[critical].items() if key not in PER_RANK_DOC_KEYS}
    merged["runs"] = [{**docs[rank]["runs"][index], "rank": rank} for index, rank in enumerate(step_ranks)]
    merged["statistics"] = {"runs": {f"{DOMAIN}_time_us": summarize(run_samples(merged, DOMAIN))}}
    regions = [rank_regions(doc) for doc in docs]
    computes = [rank_compute(doc, regions[rank]) for rank, doc in enumerate(docs)]
    found = stragglers(
        {rank: steps for rank, (steps, _) in enumerate(computes)},
        {rank: by_region for rank, (_, by_region) in enumerate(computes)},
    )
    merged["warnings"] = rank_warnings(docs) + [
        rank_straggler(
            s.rank, s.own_us, s.others_us, None if s.region == RESIDUAL_LABEL else s.region, s.region_excess_us
        )
        for s in found
    ]
    merged["ranks"] = ranks_section(profiles, times, regions, step_ranks, critical, found)
    return merged  # type: ignore[return-value]


def rank_regions(doc: Mapping[str, Any]) -> dict[str, list[float]]:
    """One rank's time per run (µs) of every region, nested ones included, then of the residual (`RESIDUAL_LABEL`)."""
    samples = {region: list(values) for region, values in region_samples(doc, DOMAIN).values()}
    samples[RESIDUAL_LABEL] = residual_samples(doc, DOMAIN)
    return samples


def rank_compute(
    doc: Mapping[str, Any], regions: Mapping[str, Sequence[float]]
) -> tuple[list[float], dict[str, list[float]]]:
    """One rank's time outside communication per run (µs): of its steps, and of each of its ``regions``
    (`rank_regions`, the residual included), which is what a straggler is judged on.

    Where the ranks meet in a collective, the fast ones wait inside it for the slow one, so step and
    region times even out across ranks; the time outside communication does not. A capture without
    communication has none to take out.
    """
    runs = doc["runs"]
    steps = [time - communication_us(run) for time, run in zip(run_samples(doc, DOMAIN), runs, strict=True)]
    in_flight = dict(region_communication_samples(doc).values())
    in_flight[RESIDUAL_LABEL] = [communication_us(run.get("residual") or {}) for run in runs]
    compute = {
        region: [time - busy for time, busy in zip(times, in_flight.get(region, [0.0] * len(runs)), strict=True)]
        for region, times in regions.items()
    }
    return steps, compute


def rank_warnings(docs: Sequence[Mapping[str, Any]]) -> list[ProfileWarning]:
    """Each rank's warnings, one per code and source: the lowest rank's message, naming every rank that has it."""
    grouped: dict[tuple[str, str], tuple[str, list[int]]] = {}
    for rank, doc in enumerate(docs):
        for item in doc.get("warnings", []):
            grouped.setdefault((item["code"], item["source"]), (item["message"], []))[1].append(rank)
    found = []
    for (code, source), (message, ranks) in grouped.items():
        also = f" (also rank(s) {', '.join(map(str, ranks[1:]))})" if ranks[1:] else ""
        found.append(warning(code, f"rank {ranks[0]}{also}: {message}", source))
    return found


def ranks_section(
    profiles: Sequence[RankProfile],
    times: Sequence[Sequence[float]],
    regions: Sequence[Mapping[str, Sequence[float]]],
    step_ranks: Sequence[int],
    critical: int,
    found: Sequence[Straggler],
) -> dict[str, Any]:
    """The merged document's ``ranks`` block (see ``profile.schema.json``)."""
    first = profiles[0].doc["distributed"]
    run_medians = [statistics.median(samples) for samples in times]
    return {
        "world_size": first["world_size"],
        "backend": first.get("backend", ""),
        "domain": DOMAIN,
        "critical_rank": critical,
        "step_ranks": list(step_ranks),
        "run_time": spread_across_ranks(run_medians),
        "regions": [
            {"region_id": region, **spread_across_ranks([statistics.median(rank[region]) for rank in regions])}
            for region in regions[0]
        ],
        "per_rank": [rank_entry(profile, times[index], regions[index]) for index, profile in enumerate(profiles)],
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
    entry: dict[str, Any] = {"median_us": list(medians), "slowest_rank": slowest(medians)}
    ratio = imbalance(medians)
    if ratio is not None:
        entry["imbalance"] = ratio
    return entry


def rank_entry(profile: RankProfile, times: Sequence[float], regions: Mapping[str, Sequence[float]]) -> dict[str, Any]:
    """One rank's line of ``ranks.per_rank``: who it was, where its file lies, and its per-run times (µs)."""
    distributed = profile.doc["distributed"]
    entry: dict[str, Any] = {
        "rank": profile.rank,
        "source": f"{profile.path.parent.name}/{profile.path.name}",
        "run_times_us": list(times),
        "region_times_us": {region: list(values) for region, values in regions.items()},
    }
    for key in ("local_rank", "host_index", "backend"):
        if key in distributed:
            entry[key] = distributed[key]
    waits = [run.get("barrier_wait_us") for run in profile.doc["runs"]]
    if all(isinstance(wait, int | float) for wait in waits):
        entry["barrier_wait_us"] = waits
    return entry


def _rank_and_world_size(profile: RankProfile) -> tuple[int, int]:
    distributed = profile.doc.get("distributed")
    values = [distributed.get(key) if isinstance(distributed, Mapping) else None for key in ("rank", "world_size")]
    if not all(type(value) is int and value >= 0 for value in values) or values[1] < 1:
        raise ProfileError(
            f"{profile.path}: no distributed block with rank and world_size; merge reads the per-rank profiles "
            "of a capture under torchrun."
        )
    return values[0], values[1]


def _same_as_first(profile: RankProfile, first: RankProfile, what: str, value: Any, expected: Any) -> None:
    if value != expected:
        raise ProfileError(
            f"{profile.path} has {what} {value} but {first.path} has {expected}; the ranks of one run share it — "
            "merge the folder of one capture, or capture again."
        )


def _region_ids(doc: Mapping[str, Any]) -> set[str]:
    return {region["id"] for region in doc.get("regions", [])}
