"""``compare``: two profiles, or the folder `tune` wrote, lined up region by region, with the optional gate."""

from __future__ import annotations

import sys
from pathlib import Path

from aitune.cli.console import console
from aitune.cli.edge import fail
from aitune.cli.history import keep_in_history


def compare_pair(
    before: Path,
    after: Path | None,
    *,
    scenario: str | None,
    domain: str | None,
    fail_if_slower: float | None,
    html: Path | None,
    keep: bool,
    history_db: str | None,
    as_json: bool,
) -> bool:
    """Print (and with ``html`` write) the comparison of ``before`` and ``after``; whether the gate failed."""
    from aitune.cli.render import diff_view
    from aitune.compare import compare_profiles, regressed
    from aitune.report import load
    from aitune.report.memo import computed_once

    if fail_if_slower is not None and not 0 <= fail_if_slower < float("inf"):
        fail(f"--fail-if-slower takes a finite percentage of at least 0 (got {fail_if_slower:g}), e.g. 5.")
    folder = None
    if html is not None:
        from aitune.cli.outputs import refuse_overwriting_inputs
        from aitune.compare.loop_report import tune_folder_files

        refuse_overwriting_inputs({"--html": html}, [before, after] if after else tune_folder_files(before))
    if after is None:  # a tune folder: its report and forecasts are read only here (two profiles need none)
        from aitune.compare.loop_report import is_tune_folder, read_tune_folder

        if not is_tune_folder(before):
            fail(f"compare needs AFTER, or a folder `aitune-profile tune` wrote as BEFORE ({before} is neither).")
        folder = read_tune_folder(before)
        old, new = folder.before, folder.after
    else:
        old, new = load(before), load(after)
    chosen = domain or (folder.report.domain if folder is not None else "cpu")
    with computed_once():  # compare, suggest and both sides' sections share each document's headline rows
        diff = compare_profiles(old, new, domain=chosen, scenario=scenario)
        if html is not None:
            from aitune.cli.outputs import emit
            from aitune.cli.pages import pair_page

            names = str(before) if after is None else f"{before} → {after}"
            emit(pair_page(old, new, diff, folder.report if folder else None, subtitle=names).encode(), html)
    failed = fail_if_slower is not None and regressed(diff, fail_if_slower)
    if keep:
        print(keep_in_history([before] if after is None else [before, after], history_db), file=sys.stderr)
    if as_json:
        from aitune.cli import outputs  # here and below: what writes files is not loaded to print a table

        verified = {"end_to_end": folder.report.end_to_end.to_dict()} if folder is not None else {}
        outputs.print_json({**diff.to_dict(), **verified, "gate": outputs.gate_dict(fail_if_slower, failed)})
    else:
        console.print(diff_view(diff))
        if folder is not None:  # the figure tune verified leads; the table above is the captures'
            from aitune.compare.end_to_end import captures_line
            from aitune.report.safe_text import terminal_text

            console.print(terminal_text(f"end to end: {folder.report.end_to_end.shown()}"))
            differ = captures_line(folder.report.end_to_end, folder.report.captures)
            if differ is not None:
                console.print(terminal_text(differ))
        if fail_if_slower is not None:
            from aitune.compare.gains import change_speedup

            verdict = "FAILED" if failed else "passed"
            run_time = change_speedup(diff.run_time)
            console.print(f"gate --fail-if-slower {fail_if_slower:g}: {verdict} (run time speedup {run_time})")
    return failed
