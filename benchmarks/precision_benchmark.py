"""The fp32 loop against the reduced-precision loop on the model zoo, in one process: a reduced level never ends worse.

    PYTHONPATH=. .venv/bin/python benchmarks/precision_benchmark.py [--precision int8|bf16]
        [--models bert_classifier image_classifier] [--time-budget 150] [--runs 7] [--repeats 15]
        [--threads 1] [--quick] [--json results.json]

For each app of ``benchmarks/zoo`` copies are built with the same seed: one stays eager, one goes
through ``aitune.torch.optimize`` at fp32, then one at ``--precision`` (both with the default min-latency
strategy and the same ``--time-budget``, as ``tune --time-budget`` gives it). Then eager, the fp32 copy and
the reduced copy are timed in turns (``--repeats`` rounds), so drift hits all three, and both tuned copies
are put back. Reported per model:

- what each loop kept tuned (``path→backend``) and, for the reduced loop, the precision each region
  ended at and why (`aitune.torch.tuning.precision_choice`);
- each loop's end-to-end speedup over eager (medians of the rounds), and the reduced copy's speedup over the
  fp32 copy, paired round by round, with its 95% interval: the issue's bar is ≥ 0.95× on every model (the
  loop keeps an fp32 winner wherever the reduced backend is slower);
- the task gate's figure (``docs/tuning.md``, "Reduced precision").

The machine's load average is printed before and after: the figures mean something on a quiet machine only.
``--quick`` (3 measured runs, 5 repeats, a 30 s budget) checks that the script works; it is no measurement.
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import statistics
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from zoo import APPS
from zoo_benchmark import call, figure, in_turns, load_line, task_gate

from aitune.analysis.statistics import paired_speedup_figure
from aitune.errors import TuningError
from aitune.torch import LoopConfig, optimize
from aitune.torch.registry import MODULE_REGISTRY
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


def set_aside_names() -> None:
    """Free the names the fp32 copy's wrappers hold, so the reduced copy's wrappers can take the same ones while
    the fp32 copy stays tuned: the registry only names regions for capture, and the fp32 copy is not captured again."""
    for entry in list(MODULE_REGISTRY):
        MODULE_REGISTRY.unregister(entry.region)


def run(name: str, options: argparse.Namespace) -> dict[str, Any]:
    """Both loops on fresh copies of ``name``, then eager, the fp32 copy and the reduced copy timed in turns: the
    reduced ÷ fp32 figure is paired round by round, so drift between the two loops cannot make it."""
    eager, input_data, function = APPS[name].build()
    eager_entry = function if function is not None else eager
    fp32_call, fp32 = tuned_copy(name, "fp32", options)
    set_aside_names()
    reduced_call, reduced = tuned_copy(name, options.precision, options)
    try:
        with torch.no_grad():
            times = in_turns(
                {"eager": functools.partial(call, eager_entry, input_data), "fp32": fp32_call, "reduced": reduced_call},
                options.repeats,
            )
    finally:
        for result in (reduced, fp32):  # the last wrapped first
            if not isinstance(result, str):
                result.restore()
    medians = {side: statistics.median(values) for side, values in times.items()}
    ratio = paired_speedup_figure(times["fp32"], times["reduced"])
    return {
        "model": name,
        "fp32_tuned": kept(fp32),
        "fp32_speedup": medians["eager"] / medians["fp32"],
        "reduced_tuned": kept(reduced),
        "reduced_speedup": medians["eager"] / medians["reduced"],
        "ratio": ratio.median,
        "ratio_interval": [ratio.low, ratio.high],
        "precision": options.precision,
        "choices": [choice.line() for choice in getattr(reduced, "precision_choices", [])],
        "task_gate": task_gate(reduced if not isinstance(reduced, str) else None),
        "medians_ms": medians,
    }


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| model | fp32 loop kept | fp32 loop, end to end | reduced loop kept | reduced loop, end to end"
        " | reduced ÷ fp32, paired [95%] | task gate |",
        "| --- | --- | ---: | --- | ---: | ---: | --- |",
    ]
    for row in rows:
        low, high = row["ratio_interval"]
        verdict = "" if row["ratio"] >= BAR else f" (below {BAR:g})"
        lines.append(
            f"| {row['model']} | {row['fp32_tuned']} | {figure(row['fp32_speedup'])} | {row['reduced_tuned']}"
            f" | {figure(row['reduced_speedup'])} | {figure(row['ratio'])} [{low:.2f}, {high:.2f}]{verdict}"
            f" | {row['task_gate']} |"
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
