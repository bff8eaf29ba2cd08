"""The history at scale: `history check` and `history show` over a store of 10,000 runs (issue 40: each ≤ 1 s).

Fills a new SQLite history with RUNS copies of the committed tuned-pipeline sample (its before
profile; one workload, one machine kind), then prints, as a Markdown table, the median wall time of
REPEATS fresh processes of ``history check`` (of its after profile) and ``history show``, beside
``python -c pass`` and ``aitune-profile --help`` in the same run, with the machine and versions.

Measure on a quiet machine (load below 1): on a busy one every figure grows with the load.

    PYTHONPATH=. .venv/bin/python benchmarks/history_benchmark.py [--runs 10000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
from pathlib import Path

from startup import median_seconds

from aitune.history.database import open_store
from aitune.history.record import record_of
from aitune.report.io import load
from aitune.report.model import json_form

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_traces" / "tuned-pipeline"


def filled_history(path: Path, runs: int) -> Path:
    """A history at ``path`` holding ``runs`` copies of the sample's before profile."""
    document = load(SAMPLE / "before" / "profile.json")
    data = json_form(document)
    with open_store(path) as store:
        for index in range(runs):
            store.add(record_of(document, commit=f"{index:040x}", branch="main"), data)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    cli = [sys.executable, "-m", "aitune.cli"]
    with tempfile.TemporaryDirectory() as folder:
        db = str(filled_history(Path(folder) / "history.db", args.runs))
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "aitune-profile --help": [*cli, "--help"],
            "history check (last 20 runs)": [
                *cli,
                "history",
                "check",
                str(SAMPLE / "after" / "profile.json"),
                "--db",
                db,
            ],
            "history show (last 50 runs)": [*cli, "history", "show", "--db", db],
        }
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))
        machine = f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
        print(f"{args.runs:,} stored runs; {machine}")
        print("\n| command | median s |\n|---|---|")
        for name, command in commands.items():
            print(f"| {name} | {median_seconds(command, args.repeats):.3f} |")


if __name__ == "__main__":
    main()
