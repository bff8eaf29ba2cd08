"""Profile the bundled example pipeline and write profile.json, profile.md and trace.json.gz.

python examples/demo.py --out demo_out
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import pipeline_app

import aitune.torch as ait


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("demo_out"), help="output folder")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10)
    options = parser.parse_args()

    prof = ait.profile(
        obj=pipeline_app.pipe,
        input_data=pipeline_app.input_data,
        inference_function=pipeline_app.infer,
        warmup_runs=options.warmup,
        measured_runs=options.runs,
        trace_file=options.out / "trace.json.gz",
    )
    profile_path = prof.save(options.out / "profile.json")
    markdown_path = options.out / "profile.md"
    markdown_path.write_text(prof.markdown())
    run = prof.data["runs"][0]
    for region in run["regions"]:
        print(f"  {region['region_id']:<32} {region['cpu_time_fraction']:6.1%} of CPU time (run 0)")
    print(f"  {'(residual)':<32} {run['residual']['cpu_time_fraction']:6.1%}")
    print(f"profile:  {profile_path}\nmarkdown: {markdown_path}\ntrace:    {options.out / 'trace.json.gz'}")


if __name__ == "__main__":
    main()
