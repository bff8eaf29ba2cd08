"""The options every command shares, and the one door for flag values: each is checked and turned into the
core's types here, and a refusal names the flag and the fix (exit 2, `aitune.cli.edge`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer

from aitune.cli.edge import fail

Debug = Annotated[bool, typer.Option("--debug", help="Show the full traceback of an error.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout, for machines.")]
ProfilePath = Annotated[Path, typer.Argument(help="A profile JSON written by capture or analyze.")]


def require_torch(command: str) -> None:
    """One sentence, not an import traceback, on a machine without torch."""
    try:
        import torch  # noqa: F401
    except ImportError:
        fail(
            f"{command} needs PyTorch, which is not installed here; install torch, or use the commands "
            "that do not need it (analyze, report, compare, suggest, validate, bundle, merge)."
        )


def check_run_counts(warmup: int, runs: int) -> None:
    """The flags' own names in the message (the Python API's check names its parameters)."""
    if warmup < 0 or runs < 1:
        fail(f"--warmup must be at least 0 and --runs at least 1 (got --warmup {warmup}, --runs {runs}).")


def check_positive(flag: str, value: float | None, unit: str, example: str) -> None:
    """NaN, infinities, zero and negatives are refused (``nan`` and ``-5`` parse as floats and meant nothing)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        fail(f"{flag} takes a finite number of {unit} above 0 (got {value:g}), e.g. {example}.")


def parse_operator_runs(given: str | None) -> int | str | None:
    """``--operator-runs``: ``all``, a count of at least 1, or None when not given."""
    if given is None or given == "all":
        return given
    if not (given.isascii() and given.isdigit()) or int(given) < 1:
        fail(f"--operator-runs must be all or a whole number of at least 1 (got {given!r}); --lite traces none.")
    return int(given)


def words(text: str | None) -> list[str]:
    """A comma-separated flag's words: ``unet, vae`` is ``["unet", "vae"]``."""
    return [word.strip() for word in (text or "").split(",") if word.strip()]


def parse_tolerance(text: str | None) -> Any:
    """``--tolerance 1e-3`` or ``1e-3,1e-4`` as a `Tolerance`; None keeps the per-dtype defaults."""
    from aitune.torch.tuning.correctness import Tolerance

    if text is None:
        return None
    try:
        values = [float(word) for word in words(text)]
    except ValueError:
        fail(f"--tolerance takes RTOL or RTOL,ATOL as numbers (got {text!r}), e.g. --tolerance 1e-3,1e-4.")
    if not 1 <= len(values) <= 2 or not all(0 <= value < float("inf") for value in values):
        fail(f"--tolerance takes one or two finite numbers of at least 0 (got {text!r}), e.g. --tolerance 1e-3.")
    return Tolerance(*values)
