"""Start-up cost of the everyday commands, whole process: what a user waits for in a shell or in CI.

Prints, as a Markdown table, the median wall time of N runs of each command in a fresh process,
beside ``python -c pass`` in the same run: ``aitune-profile --help``, and ``report``, ``validate``,
``suggest``, ``compare`` of a profile of about 100 KB (the committed tuned-pipeline sample with its
measured runs repeated until it is that big). Then the viewer's runs folder of 1,000 profiles: listing it.

Measure on a quiet machine (load below 1): on a busy one every figure grows with the load.

    PYTHONPATH=. .venv/bin/python benchmarks/startup.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_traces" / "tuned-pipeline"
TARGET_BYTES = 100_000
PROFILES_LISTED = 1_000


def padded_profile(source: Path, out: Path, target_bytes: int = TARGET_BYTES) -> Path:
    """``source`` with its measured runs repeated until the file is about ``target_bytes``; still valid."""
    doc = json.loads(source.read_text())
    runs = doc["runs"]
    while len(json.dumps(doc, indent=2)) < target_bytes:
        doc["runs"] = doc["runs"] + runs[: max(1, len(runs) // 2)]
    doc.setdefault("config", {})["measured_runs"] = len(doc["runs"])
    out.write_text(json.dumps(doc, indent=2))
    return out


def median_seconds(command: list[str], repeats: int) -> float:
    """Median wall time of ``command`` over ``repeats`` fresh processes (output discarded; must exit 0)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, cwd=ROOT)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def listing_seconds(folder: Path, repeats: int) -> float:
    """Median time of the viewer's runs-folder listing of ``folder`` (in this process, panel imported once)."""
    from aitune.viewer.store import ProfileStore

    store = ProfileStore(runs_dir=folder)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        store.available()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    options = parser.parse_args()
    cli = [sys.executable, "-m", "aitune.cli"]
    with tempfile.TemporaryDirectory() as scratch:
        before = padded_profile(SAMPLE / "before" / "profile.json", Path(scratch) / "before.json")
        after = padded_profile(SAMPLE / "after" / "profile.json", Path(scratch) / "after.json")
        subprocess.run([*cli, "validate", str(before)], stdout=subprocess.DEVNULL, check=True, cwd=ROOT)
        rows = [
            ("`python -c pass`", [sys.executable, "-c", "pass"]),
            ("`aitune-profile --help`", [*cli, "--help"]),
            ("`aitune-profile report`", [*cli, "report", str(before)]),
            ("`aitune-profile validate`", [*cli, "validate", str(before)]),
            ("`aitune-profile suggest`", [*cli, "suggest", str(before)]),
            ("`aitune-profile compare`", [*cli, "compare", str(before), str(after)]),
        ]
        size = before.stat().st_size / 1000
        print(f"whole process, median of {options.repeats}; the profile: {size:.0f} KB, {sys.version.split()[0]}")
        print("| what | seconds |")
        print("| --- | --- |")
        for label, command in rows:
            print(f"| {label} | {median_seconds(command, options.repeats):.3f} |")
        runs = Path(scratch) / "runs"
        for index in range(PROFILES_LISTED):
            folder = runs / f"run{index:04d}"
            folder.mkdir(parents=True)
            shutil.copyfile(before, folder / "profile.json")
        print(f"| viewer: list a runs folder of {PROFILES_LISTED:,} profiles | {listing_seconds(runs, 3):.3f} |")


if __name__ == "__main__":
    main()
