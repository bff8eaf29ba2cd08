"""How often the loop's end-to-end verification calls a win where there is none, on this machine's real noise.

    PYTHONPATH=. .venv/bin/python benchmarks/verification_noise.py [--examples pipeline decoder] [--trials 40]

An A/A test: both sides of every comparison run the same eager call, so every "faster beyond noise"
verdict is a false win (the issue's worry: two captures of an untouched model differed by 15%).
Then an A/B test with a known slowdown (a sleep of ``--effect`` of the median run added to one side)
shows how often a real loss of that size is caught. Reported per example: false-win rate (the
design's target: at most 2.5%, one tail of the 95% interval, lower with the margin), the median
interval width, the rounds used, and the share of real losses put back.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from loop_benchmark import EXAMPLES
from tuning_benchmark import machine_line

from aitune.compare.verification import VerifyConfig, compare_sets
from aitune.torch.performance.inputs import normalize_input

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))


def timer(call: Callable[[], Any], extra_s: float) -> Callable[[frozenset[str]], list[float]]:
    """``measure(enabled)``: one call in µs; with ``"slow"`` enabled, ``extra_s`` of sleep is added."""

    def measure(enabled: frozenset[str]) -> list[float]:
        start = time.perf_counter()
        call()
        if "slow" in enabled:
            time.sleep(extra_s)
        return [(time.perf_counter() - start) * 1e6]

    return measure


def trial_rates(call: Callable[[], Any], trials: int, effect: float, config: VerifyConfig) -> dict[str, float]:
    """False-win rate (A/A), caught-loss rate (A/B with a slowdown of ``effect``), interval width, rounds."""
    runs = [timer(call, 0.0)(frozenset())[0] for _ in range(5)]
    extra_s = effect * statistics.median(runs) / 1e6
    same = [compare_sets(timer(call, 0.0), frozenset(), frozenset({"x"}), config) for _ in range(trials)]
    slower = [compare_sets(timer(call, extra_s), frozenset(), frozenset({"slow"}), config) for _ in range(trials)]
    return {
        "false_win": sum(s.faster(config.margin) for s in same) / trials,
        "width": statistics.median(s.ci_high - s.ci_low for s in same),
        "rounds": statistics.median(s.rounds for s in same),
        "loss_put_back": sum(not s.faster(config.margin) for s in slower) / trials,
        "loss_called_slower": sum(s.ci_high < 1 for s in slower) / trials,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", nargs="+", default=list(EXAMPLES), choices=list(EXAMPLES))
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--effect", type=float, default=0.05, help="The known slowdown, as a share of the run.")
    args = parser.parse_args()
    config = VerifyConfig()
    print(machine_line())
    print(f"{'example':<10}{'false wins':>12}{'CI width':>10}{'rounds':>8}{'loss put back':>15}{'called slower':>15}")
    for name in args.examples:
        obj, entry, input_data = EXAMPLES[name]()
        positional, keywords = normalize_input(input_data)
        function = entry(obj)
        with torch.no_grad():
            call = functools.partial(function, *positional, **keywords)
            rates = trial_rates(call, args.trials, args.effect, config)
        print(
            f"{name:<10}{rates['false_win']:>12.1%}{rates['width']:>10.3f}{rates['rounds']:>8.0f}"
            f"{rates['loss_put_back']:>15.1%}{rates['loss_called_slower']:>15.1%}"
        )


if __name__ == "__main__":
    main()
