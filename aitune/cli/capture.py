"""``capture``, ``analyze`` and ``merge``: the commands that write a profile folder (profile.json, profile.md and,
for a capture, its trace), and print its summary."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

from aitune.cli import outputs
from aitune.cli.console import console
from aitune.cli.edge import fail
from aitune.cli.history import keep_in_history
from aitune.cli.options import check_run_counts, parse_operator_runs, require_torch


def capture_target(
    target: str,
    script_args: list[str] | None,
    *,
    obj: str | None,
    input_name: str | None,
    warmup: int,
    runs: int,
    out: Path | None,
    no_trace: bool,
    lite: bool,
    operator_runs: str | None,
    keep: bool,
    history_db: str | None,
    as_json: bool,
) -> None:
    """Profile a function of a file or module (``app.py:infer``), or a whole script; write and print its profile."""
    require_torch("capture")
    check_run_counts(warmup, runs)
    source, _, function = target.rpartition(":") if ":" in target else (target, "", "")
    folder = out or outputs.default_folder(source, function)
    if function and script_args:
        fail("script arguments after -- apply to script mode only; drop them, or name a script without :function.")
    for flag, given in (("--lite", lite), ("--operator-runs", operator_runs is not None)):
        if given and not function:
            fail(f"{flag} applies to entry mode only; name the function to profile (app.py:infer) or drop {flag}.")
    if lite and operator_runs is not None:
        fail("--lite traces no operators; drop --operator-runs, or drop --lite.")
    # With --json, stdout carries the JSON alone: what the user's code prints goes to stderr.
    with contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
        if function:
            written = outputs.capture_entry_into(
                folder,
                source,
                function,
                obj,
                input_name,
                warmup,
                runs,
                not no_trace,
                lite=lite,
                operator_runs=parse_operator_runs(operator_runs),
            )
        else:
            written = outputs.capture_script_into(folder, Path(source), script_args or [], not no_trace)
    if keep:
        print(keep_in_history([item.profile for item in written], history_db), file=sys.stderr)
    if as_json:
        outputs.print_json({"output": str(folder), "profiles": [item.as_dict() for item in written]})
        return
    for item in written:
        _print_profile(item.doc)
        console.print(item.listing(), markup=False)


def analyze_trace_file(trace: Path, *, out: Path | None, as_json: bool) -> None:
    """The profile re-derived from a saved Chrome trace, printed (and written into ``out``)."""
    from aitune.cli.render import profile_summary

    if out is not None:
        outputs.refuse_overwriting_inputs({"--out": outputs.profile_files(out)}, [trace])
    doc = outputs.analyze_trace(trace)
    written = None if out is None else outputs.write_profile_into(out, doc, trace=trace)
    if as_json:
        outputs.print_json(doc)
        return
    console.print(profile_summary(doc))
    if written is not None:
        console.print(written.listing(), markup=False)


def merge_ranks(folder: Path, *, out: Path | None, as_json: bool) -> None:
    """The per-rank profiles of one distributed run merged into one document, written and printed."""
    from aitune.cli.render import ranks_view
    from aitune.report.merge import MERGED_FOLDER, merge_profiles, rank_profile_paths, rank_profiles
    from aitune.report.model import as_profile, json_form

    target = out or folder / MERGED_FOLDER
    outputs.refuse_overwriting_inputs({"--out": outputs.profile_files(target)}, rank_profile_paths(folder))
    doc = merge_profiles(rank_profiles(folder))  # one rank in memory at a time; every check before a write
    written = outputs.write_profile_into(target, doc, exclusive=True)
    if as_json:
        ranks = json_form(as_profile(doc).ranks)  # in the model's key order, as `report --format json` prints
        outputs.print_json({"profile": str(written.profile), "markdown": str(written.markdown), "ranks": ranks})
        return
    _print_profile(doc, ranks_view(doc))
    console.print(f"profile:  {written.profile}\nmarkdown: {written.markdown}", markup=False)


def _print_profile(doc: Any, *between: Any) -> None:
    """A written profile's summary, then ``between`` (a merged document's ranks), then its warnings."""
    from aitune.cli.render import profile_summary, warnings_table
    from aitune.report.model import as_profile

    warnings = warnings_table(as_profile(doc).warnings)
    for part in (profile_summary(doc), *between, *([warnings] if warnings is not None else [])):
        console.print(part)
