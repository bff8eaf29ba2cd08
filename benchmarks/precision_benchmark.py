"""The fp32 loop against the reduced-precision loop on the model zoo, in one process: a reduced level never ends worse.

    PYTHONPATH=. .venv/bin/python benchmarks/precision_benchmark.py [--precision int8|bf16]
        [--models bert_classifier image_classifier] [--time-budget 150] [--runs 7] [--repeats 15]
        [--threads 1] [--quick] [--json results.json]

For each app of ``benchmarks/zoo`` copies are built with the same seed: one stays eager, one goes
through ``aitune.torch.optimize`` at fp32, then one at ``--precision`` (both with the default min-latency
strategy and the same ``--time-budget``, as ``tune --time-budget`` gives it). Each tuned copy is timed in
turns with the eager one (``--repeats`` calls each, medians), so drift hits both, and put back before
the next loop (a wrapper's name, the module's path, is taken once per process). Reported per model:

- what each loop kept tuned (``path→backend``) and, for the reduced loop, the precision each region
  ended at and why (`aitune.torch.tuning.precision_choice`);
- each loop's end-to-end speedup over eager, interleaved, and the reduced ÷ fp32 ratio: the issue's bar
  is ≥ 0.95× on every model (the loop keeps an fp32 winner wherever the reduced backend is slower);
- the task gate's figure (``docs/tuning.md``, "Reduced precision").

The machine's load average is printed before and after: the figures mean something on a quiet machine only.
``--quick`` (3 measured runs, 5 repeats, a 30 s budget) checks that the script works; it is no measurement.
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from zoo import APPS
from zoo_benchmark import call, figure, interleaved, load_line, task_gate

from aitune.errors import TuningError
from aitune.torch import LoopConfig, optimize
from aitune.torch.tuning.strategies import named_strategy

BAR = 0.95
"""The reduced loop's end-to-end speedup must be at least this share of the fp32 loop's, on every model."""


def tuned_copy(name: str, precision: str, options: argparse.Namespace) -> tuple[Any, Any]:
    """A fresh copy tuned at ``precision`` (its call, and the loop's result or the refusal's sentence)."""
    obj, input_data, function = APPS[name].build()
    entry = function if function is not None else obj
    strategy = named_strategy("min-latency", time_budget_s=options.time_budget, precision=precision)
    config = LoopConfig(measured_runs=options.runs, precision=precision, strategy=strategy)
    try:
        result: Any = optimize(obj, input_data, entry, config=config)
    except TuningError as error:  # suggest found nothing worth tuning: the copy stays as it was, and says why
        result = str(error)
    return (lambda: call(entry, input_data)), result


def kept(result: Any) -> str:
    if isinstance(result, str):
        return f"none ({result})"
    return ", ".join(f"{gain.path or '(whole)'}→{gain.winner}" for gain in result.gains if gain.tuned) or "none"


def speedup_over(
    eager: Callable[[], Any], name: str, precision: str, options: argparse.Namespace
) -> tuple[float, Any, dict[str, float]]:
    """The copy tuned at ``precision``: its speedup over ``eager`` timed in turns, its loop's result (put back
    afterwards) or the refusal's sentence, and both medians."""
    tuned, result = tuned_copy(name, precision, options)
    with torch.no_grad():
        medians = interleaved({"eager": eager, precision: tuned}, options.repeats)
    if not isinstance(result, str):
        result.restore()
    return medians["eager"] / medians[precision], result, medians


def run(name: str, options: argparse.Namespace) -> dict[str, Any]:
    eager, input_data, function = APPS[name].build()
    eager_entry = function if function is not None else eager
    plain = functools.partial(call, eager_entry, input_data)
    fp32_speedup, fp32, fp32_ms = speedup_over(plain, name, "fp32", options)
    reduced_speedup, reduced, reduced_ms = speedup_over(plain, name, options.precision, options)
    row = {
        "model": name,
        "fp32_tuned": kept(fp32),
        "fp32_speedup": fp32_speedup,
        "reduced_tuned": kept(reduced),
        "reduced_speedup": reduced_speedup,
        "ratio": reduced_speedup / fp32_speedup,
        "precision": options.precision,
        "choices": [choice.line() for choice in getattr(reduced, "precision_choices", [])],
        "task_gate": task_gate(reduced if not isinstance(reduced, str) else None),
        "medians_ms": {"fp32": fp32_ms, options.precision: reduced_ms},
    }
    return row


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| model | fp32 loop kept | fp32 loop, end to end | reduced loop kept | reduced loop, end to end"
        " | reduced ÷ fp32 | task gate |",
        "| --- | --- | ---: | --- | ---: | ---: | --- |",
    ]
    for row in rows:
        verdict = "" if row["ratio"] >= BAR else f" (below {BAR:g})"
        lines.append(
            f"| {row['model']} | {row['fp32_tuned']} | {figure(row['fp32_speedup'])} | {row['reduced_tuned']}"
            f" | {figure(row['reduced_speedup'])} | {figure(row['ratio'])}{verdict} | {row['task_gate']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--precision", default="int8", choices=["bf16", "int8"], help="the reduced level")
    parser.add_argument("--models", nargs="+", default=list(APPS), choices=list(APPS))
    parser.add_argument("--time-budget", type=float, default=150.0, help="each loop's budget in seconds")
    parser.add_argument("--runs", type=int, default=7, help="measured runs per capture")
    parser.add_argument("--repeats", type=int, default=15, help="interleaved timing repeats")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--quick", action="store_true", help="3 runs, 5 repeats, 30 s budget: checks the script")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows to this file")
    options = parser.parse_args()
    if options.quick:
        options.runs, options.repeats, options.time_budget = 3, 5, 30.0
    if options.threads is not None:
        torch.set_num_threads(options.threads)
    print(
        f"{platform.platform()}, {platform.processor() or platform.machine()}, torch {torch.__version__},"
        f" {torch.get_num_threads()} thread(s), --precision {options.precision}"
    )
    print(load_line("at the start"))
    rows = []
    for name in options.models:
        rows.append(run(name, options))
        print(f"{name}: done", flush=True)
    print(load_line("at the end"))
    print()
    print(table(rows))
    print()
    below = [row["model"] for row in rows if row["ratio"] < BAR]
    print(f"reduced ÷ fp32 below {BAR:g}: {', '.join(below) if below else 'none'}")
    for row in rows:
        for line in row["choices"]:
            print(f"{row['model']}: precision {line}")
    if options.json is not None:
        options.json.write_text(json.dumps(rows, indent=2, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
