"""Readers of a document's samples: each measured run's time, the residual and each region's time per run.

Every later stage (compare, suggest, merge, the loop's report, the terminal and the viewer) reads a
profile's per-run numbers through these, so a region's path and its times mean one thing everywhere.
A region's *path* is its id without the kind prefix (``aot_module:unet`` → ``unet``), relative to the
root object a document names (``target.root``).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from aitune.analysis.shares import fraction
from aitune.errors import ProfileError
from aitune.markers import region_path
from aitune.report import document
from aitune.report.headline import headline_rows
from aitune.report.model import (
    UNSET,
    Profile,
    ProfileLike,
    RegionShare,
    Residual,
    Run,
    TreeNode,
    as_profile,
    given,
    time_in,
)

DOMAINS = ("cpu", "device")

Samples = dict[str, tuple[str, list[float]]]
"""Per path: the region id (or headline label) found there and its time in each run (µs)."""


def select_scenario(doc: ProfileLike, scenario: str | None) -> ProfileLike:
    """The document as if only ``scenario`` had been profiled (None: as it is); `ProfileError` for an unknown name."""
    if scenario is not None and not document.scenario_names(doc):
        raise ProfileError(f"--scenario {scenario}: this profile has no scenarios; drop --scenario.")
    try:
        return document.select_scenario(doc, scenario)
    except KeyError as error:
        raise ProfileError(f"{error.args[0]}; pick one of those with --scenario.") from None


def path_of(region_id: str, root: str = "") -> str:
    """The region's path: its id without the kind prefix (``aot_module:unet`` → ``unet``), relative to ``root``.

    ``path_of("untuned_module:pipe.unet", "pipe") == "unet"``; a path outside ``root`` stays as it is.
    """
    return relative_path(region_path(region_id), root)


def relative_path(path: str, root: str) -> str:
    """``path`` relative to ``root`` (``pipe.unet`` → ``unet`` under ``pipe``); a path outside ``root`` stays."""
    return path[len(root) + 1 :] if root and path.startswith(root + ".") else path


def has_device_time(doc: ProfileLike) -> bool:
    """Whether the document has a device domain: every measured run carries device time (none without runs)."""
    runs = as_profile(doc).runs
    return bool(runs) and all(run.timing.device_time_us is not UNSET for run in runs)


def median_run(runs: Sequence[Run], domain: str = "cpu") -> Run:
    """The median run by its ``domain`` time: the lower middle one of an even count, ties by run index."""
    ordered = sorted(runs, key=lambda run: (time_in(run.timing, domain) or 0.0, run.run_index))
    return ordered[(len(ordered) - 1) // 2]


def run_samples(doc: ProfileLike, domain: str) -> list[float]:
    """Each measured run's time in ``domain`` (µs)."""
    return [time_in(run.timing, domain) or 0.0 for run in as_profile(doc).runs]


def residual_samples(doc: ProfileLike, domain: str) -> list[float]:
    """Each measured run's time outside every region in ``domain`` (µs): the headline's residual.

    Below regions that span the run, that leaves out their self time, which the document's own
    ``runs[i].residual`` (at the level below them) holds.
    """
    return headline_rows(doc, domain)[-1].times_us


@dataclass(frozen=True)
class ResidualCause:
    """One cause of the residual (synchronisation, copies, operators, Python…), medians over the runs that
    traced operators (`aitune.report.model.Section.traced_runs`)."""

    time_us: float  # its CPU time per run
    share: float  # its fraction of the run
    of_residual: float  # its fraction of the residual


def residual_causes(doc: ProfileLike) -> dict[str, ResidualCause]:
    """Each residual cause that every traced run split its residual into, in the first run's order;
    empty when no run did (a lite or an AITune document)."""
    residuals = [run.residual for run in as_profile(doc).traced_runs() if run.residual.causes is not UNSET]
    if not residuals:
        return {}
    causes = [given(residual.causes, {}) for residual in residuals]
    summary = {}
    for cause in causes[0]:
        if not all(cause in split for split in causes):
            continue  # communication: only in a trace that holds some
        parts = [split[cause] for split in causes]
        of_residual = [
            fraction(part.cpu_time_us, residual.cpu_time_us) for part, residual in zip(parts, residuals, strict=True)
        ]
        summary[cause] = ResidualCause(
            time_us=statistics.median(part.cpu_time_us for part in parts),
            share=statistics.median(part.cpu_time_fraction for part in parts),
            of_residual=statistics.median(of_residual),
        )
    return summary


def region_samples(doc: ProfileLike, domain: str, root: str = "", keep: Collection[str] = ()) -> Samples:
    """Per region path (see `path_of`): its id and its time in each run (µs; 0 in a run where it did not run).

    Nested regions (the run's ``tree``) count under their own path, so a region that moved from
    top level into a tree still lines up (``keep`` is the headline's: every region has a row here).
    """
    return _region_values(as_profile(doc), lambda share: time_in(share, domain) or 0.0, root)


def region_communication_samples(doc: ProfileLike) -> Samples:
    """Per region path, as `region_samples`: its CPU time with communication in flight in each run (µs; 0 without)."""
    return _region_values(as_profile(doc), communication_us)


def communication_us(part: RegionShare | TreeNode | Run | Residual) -> float:
    """The CPU time with communication in flight of a region, a run or a residual (µs; 0 when it has none)."""
    return 0.0 if part.communication is UNSET else part.communication.cpu_time_us


_Share = RegionShare | TreeNode
"""A region's times in one run: a topmost region's share, or a node of the run's tree."""


def _region_values(record: Profile, value_of: Callable[[_Share], float], root: str = "") -> Samples:
    samples: Samples = {}
    runs = record.runs
    for index, run in enumerate(runs):
        for share in _walk(run.top_nodes()):
            path = path_of(share.region_id, root)
            _, values = samples.setdefault(path, (share.region_id, [0.0] * len(runs)))
            values[index] += value_of(share)
    return samples


def headline_samples(doc: ProfileLike, domain: str, root: str = "", keep: Collection[str] = ()) -> Samples:
    """Per path of a headline row but the residual (see `aitune.report.headline_rows`, which ``keep`` goes to):
    its label and its times (µs)."""
    return {relative_path(row.path, root): (row.label, row.times_us) for row in headline_rows(doc, domain, keep)[:-1]}


def _walk(shares: Iterable[_Share]) -> Iterable[_Share]:
    for share in shares:
        yield share
        if isinstance(share, TreeNode):
            yield from _walk(share.children)
