"""Validating a profile against parsing it: the typed decode and the invariants, ÷ orjson's parse of the same bytes.

    python benchmarks/validate_speed.py [--quick]

For a 56 KB profile (``sample_traces/tuned-pipeline/before``) and one of about 100 KB (the same profile with
its runs doubled), it times, interleaved so drift hits all alike, ``orjson.loads`` of the bytes, validating
them (the typed decode, which parses and checks at once, and the invariants on the typed record: what
``aitune.report.load`` runs, the typed record every reader then reads), and prints the medians and their
ratio. The target is a validation of at most 2× the parse.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402

from aitune.report.invariants import profile_problems  # noqa: E402
from aitune.report.io import dumps  # noqa: E402
from aitune.report.validate import decode_profile  # noqa: E402

SAMPLE = ROOT / "sample_traces" / "tuned-pipeline" / "before" / "profile.json"


def doubled(data: bytes) -> bytes:
    """The profile with every run listed twice (renumbered): about twice the bytes, still valid."""
    doc = orjson.loads(data)
    doc["runs"] = [*doc["runs"], *doc["runs"]]
    doc["runs"] = [{**run, "run_index": index} for index, run in enumerate(doc["runs"])]
    return dumps(doc)


def seconds(action, repeat: int) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        action()
    return (time.perf_counter() - start) / repeat


def validated(data: bytes) -> msgspec.Struct:
    profile = decode_profile(data)
    assert not profile_problems(profile), "the benchmark's profile must be valid"
    return profile


def measure(data: bytes, rounds: int, repeat: int) -> tuple[float, float]:
    validated(data)
    parse, check = [], []
    for _ in range(rounds):
        parse.append(seconds(lambda: orjson.loads(data), repeat))
        check.append(seconds(lambda: validated(data), repeat))
    return statistics.median(parse), statistics.median(check)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few rounds: checks the script runs, not the figures")
    args = parser.parse_args()
    rounds, repeat = (3, 5) if args.quick else (21, 50)
    small = SAMPLE.read_bytes()
    for label, data in (("sample profile", small), ("runs doubled", doubled(small))):
        parse, check = measure(data, rounds, repeat)
        print(
            f"{label:>15}: {len(data) / 1024:6.0f} KB  orjson parse {parse * 1e3:7.3f} ms  "
            f"validate {check * 1e3:7.3f} ms ({check / parse:4.2f}×)"
        )


if __name__ == "__main__":
    main()
