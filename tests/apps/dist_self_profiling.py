"""One rank of a distributed job profiling itself with the Python API; aitune brings the process group up.

    torchrun --nproc-per-node 2 tests/apps/dist_self_profiling.py OUT

writes OUT/rank<r>/trace.json and OUT/rank<r>/profile.json on every rank, then a lite capture's
OUT/rank<r>/lite.json: two groups made and destroyed by aitune in one process.
"""

import sys
from pathlib import Path

from dist_app import infer, model

import aitune.torch as ait

if __name__ == "__main__":  # pytest imports the apps folder for doctests: running needs torchrun
    out = Path(sys.argv[1])
    prof = ait.profile(model, inference_function=infer, warmup_runs=1, measured_runs=2, trace_file=out / "trace.json")
    print(f"saved {prof.save(out / 'profile.json')} beside {prof.trace_file.name}")
    ait.profile(
        model, inference_function=infer, warmup_runs=1, measured_runs=2, trace_file=out / "lite.json", mode="lite"
    )
