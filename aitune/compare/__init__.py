"""Two documents in, what changed out (no torch).

`diff` lines two profiles up region by region and gives each change with a confidence interval;
`gains` sets each tuned region's realised gain beside suggest's forecast; `verification` decides, from
timings of runs with and without the tuned regions, which ones stay tuned; `loop_report` reads the
reports a tune folder holds. The per-run samples all of them read come from `aitune.report.samples`.
"""

from aitune.compare.change import Change
from aitune.compare.diff import (
    MemoryChange,
    OperatorChange,
    ProfileDiff,
    RegionChange,
    compare_profiles,
    headline_paths,
    kept_whole,
    lined_up,
    operator_changes,
    regressed,
)

__all__ = [
    "Change",
    "MemoryChange",
    "OperatorChange",
    "ProfileDiff",
    "RegionChange",
    "compare_profiles",
    "headline_paths",
    "kept_whole",
    "lined_up",
    "operator_changes",
    "regressed",
]
