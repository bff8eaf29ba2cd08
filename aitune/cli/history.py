"""``aitune-profile history``: keep every profile, check a new one against its past, show trends and the ledger.

Thin commands over `aitune.history`; SQLAlchemy is imported inside each command, so the start-up of
every other command (and of ``--help``) never loads it.
"""

# No `from __future__ import annotations`: Typer reads the annotations (see aitune/cli/app.py).
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from aitune.cli.console import console
from aitune.cli.edge import EXIT_GATE_FAILED, fail, guarded
from aitune.cli.options import AsJson, Debug

if TYPE_CHECKING:
    from aitune.history.store import HistoryStore
    from aitune.report.model import Profile

history_app = typer.Typer(
    name="history",
    help="Keep every profile in a history database; check a new one for regressions; show trends and the ledger.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

Db = Annotated[
    str | None,
    typer.Option(
        "--db",
        envvar="AITUNE_HISTORY",
        help="The history: a file path (SQLite) or postgresql://user@host/db (default .aitune/history.db).",
    ),
]
KeepInHistory = Annotated[
    bool,
    typer.Option(
        "--history",
        envvar="AITUNE_HISTORY_RECORD",
        help="Also keep what this command wrote in the history (--db's, see `history --help`); "
        "AITUNE_HISTORY_RECORD=1 makes it the default.",
    ),
]
HistoryDb = Annotated[
    str | None,
    typer.Option("--history-db", envvar="AITUNE_HISTORY", help="The history --history keeps it in (as --db)."),
]
PROGRESS_FROM = 10
"""Imports of at least this many profiles show a progress bar on stderr."""


def _store(db: str | None) -> "HistoryStore":
    from aitune.history.database import open_store

    return open_store(db)


@history_app.command()
@guarded
def add(
    paths: Annotated[list[Path], typer.Argument(help="Profile files, tune folders, or folders of captures.")],
    commit: Annotated[str | None, typer.Option(help="The commit measured (default: git's HEAD here).")] = None,
    branch: Annotated[str | None, typer.Option(help="The branch measured (default: git's current branch).")] = None,
    tag: Annotated[list[str] | None, typer.Option(help="A label to find the run by (repeatable).")] = None,
    keep_last: Annotated[
        int | None, typer.Option(help="Then keep only the last N runs of each workload and machine.", metavar="N")
    ] = None,
    db: Db = None,
    debug: Debug = False,
) -> None:
    """Store profiles (and a tune folder's predictions and verified gains) in the history."""
    from aitune.history.provenance import commit_and_branch
    from aitune.history.record import record_of
    from aitune.history.sources import profile_files, sources_of
    from aitune.report.model import json_form

    _check_count("--keep-last", keep_last)
    files = profile_files(paths)
    git_commit, git_branch = commit_and_branch(Path.cwd()) if commit is None or branch is None else (None, None)
    added = 0
    with _store(db) as store, _Progress(len(files), "adding") as advance:
        for path in files:
            for source in sources_of(path):
                record = record_of(
                    source.document, commit=commit or git_commit, branch=branch or git_branch, tags=tag or ()
                )
                run_id = store.add(record, json_form(source.document))
                store.add_predictions(run_id, record.machine, source.predictions)
                added += 1
            advance()
        pruned = store.prune(keep_last=keep_last) if keep_last is not None else 0
    console.print(f"added {added} run(s) to {store.where}" + (f"; pruned {pruned}" if pruned else ""), markup=False)


@history_app.command()
@guarded
def check(
    new: Annotated[Path, typer.Argument(help="The profile to check (stored or not).")],
    against: Annotated[
        str | None, typer.Option(help="Compare with the runs of this branch (default: any branch).", metavar="BRANCH")
    ] = None,
    last: Annotated[int, typer.Option(help="Compare with the last N stored runs.", metavar="N")] = 20,
    threshold: Annotated[
        float, typer.Option(help="Exit 1 when a row is slower by more than PCT percent, beyond noise.", metavar="PCT")
    ] = 10.0,
    any_machine: Annotated[
        bool, typer.Option("--any-machine", help="Compare with runs of other machines, torch versions or devices.")
    ] = False,
    add_it: Annotated[bool, typer.Option("--add", help="Then store NEW in the history.")] = False,
    db: Db = None,
    as_json: AsJson = False,
    debug: Debug = False,
) -> None:
    """Check a profile against the stored runs of its workload, region by region; exit 1 on a regression."""
    from aitune.cli.history_views import check_view
    from aitune.history.gate import MIN_BASELINE_RUNS, check_against_history
    from aitune.report.io import load
    from aitune.report.model import json_form

    _check_count("--last", last)
    if not 0 <= threshold < float("inf"):
        fail(f"--threshold takes a finite percentage of at least 0 (got {threshold:g}), e.g. 10.")
    doc = load(new)
    with _store(db) as store:
        result = check_against_history(
            store, doc, branch=against, last=last, threshold=threshold / 100, any_machine=any_machine
        )
        if add_it:
            store.add(result.record, json_form(doc))
    if as_json:
        from aitune.cli.outputs import print_json

        print_json(
            {
                "baseline_runs": len(result.baseline),
                "judged": result.enough,
                "regressed": [v.path for v in result.regressed],
                "rows": [vars(v) for v in result.verdicts],
            }
        )
    elif not result.baseline:
        console.print("no stored runs of this workload to compare with: nothing to judge yet.", markup=False)
    else:
        if not result.enough:
            console.print(
                f"only {len(result.baseline)} stored run(s) of this workload, fewer than {MIN_BASELINE_RUNS}: "
                "shown, not judged (the gate passes).",
                markup=False,
            )
        console.print(check_view(result))
    if result.regressed:
        raise typer.Exit(EXIT_GATE_FAILED)


@history_app.command()
@guarded
def show(
    workload: Annotated[str | None, typer.Option(help="Only workloads whose label or id starts with this.")] = None,
    last: Annotated[int, typer.Option(help="The last N runs of each workload.", metavar="N")] = 50,
    top: Annotated[int, typer.Option(help="The K largest rows besides the run time.", metavar="K")] = 5,
    db: Db = None,
    debug: Debug = False,
) -> None:
    """Each workload's run time and largest regions over its stored runs, as sparklines."""
    from aitune.cli.history_views import trend_view

    _check_count("--last", last)
    _check_count("--top", top)
    with _store(db) as store:
        found = [
            w
            for w in store.workloads()
            if workload is None or w.label.startswith(workload) or w.workload.startswith(workload)
        ]
        if not found:
            fail(
                "no stored runs"
                + (f" of a workload starting {workload!r}" if workload else "")
                + "; add profiles with `aitune-profile history add`."
            )
        for item in found:
            console.print(trend_view(item, store.trend(item.workload, item.machine, last), top))


@history_app.command()
@guarded
def report(
    output_format: Annotated[
        str, typer.Option("--format", help="html (the terminal's view is `history show`).")
    ] = "html",
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write the page here instead of stdout.")
    ] = None,
    last: Annotated[int, typer.Option(help="The last N runs of each workload.", metavar="N")] = 50,
    top: Annotated[int, typer.Option(help="The K largest rows besides the run time.", metavar="K")] = 5,
    db: Db = None,
    debug: Debug = False,
) -> None:
    """Every workload's trends as one self-contained HTML page (no script; opens offline)."""
    from aitune.history.html import trend_page

    if output_format != "html":
        fail(f"unknown --format {output_format!r}; history report writes html (`history show` is the terminal's).")
    _check_count("--last", last)
    _check_count("--top", top)
    with _store(db) as store:
        trends = [(w, store.trend(w.workload, w.machine, last)) for w in store.workloads()]
    page = trend_page(store.where, trends, top).encode()
    if output is None:
        sys.stdout.buffer.write(page)
        return
    from aitune.report.io import write_atomic

    write_atomic(output, page)
    print(f"wrote {output} ({len(page) / 1e3:,.1f} kB)", file=sys.stderr)


@history_app.command()
@guarded
def ledger(db: Db = None, as_json: AsJson = False, debug: Debug = False) -> None:
    """How far predicted gains were from verified ones, per backend and device: bias, spread, Kendall τ."""
    from aitune.cli.history_views import ledger_view
    from aitune.history.ledger import ledger as ledger_rows

    with _store(db) as store:
        rows = ledger_rows(store.predictions())
    if as_json:
        from aitune.cli.outputs import print_json

        print_json([vars(row) for row in rows])
    elif not rows:
        console.print("no predictions stored yet: add a tune folder with `aitune-profile history add`.")
    else:
        console.print(ledger_view(rows))


@history_app.command()
@guarded
def prune(
    keep_last: Annotated[
        int | None, typer.Option(help="Keep the last N runs of each workload and machine.", metavar="N")
    ] = None,
    older_than: Annotated[
        float | None, typer.Option(help="Delete runs recorded more than DAYS days ago.", metavar="DAYS")
    ] = None,
    db: Db = None,
    debug: Debug = False,
) -> None:
    """Bound what the history keeps, by count and by age."""
    if keep_last is None and older_than is None:
        fail("prune needs --keep-last N or --older-than DAYS (or both).")
    _check_count("--keep-last", keep_last, least=0)
    if older_than is not None and not 0 <= older_than < float("inf"):
        fail(f"--older-than takes a finite number of days of at least 0 (got {older_than:g}).")
    with _store(db) as store:
        gone = store.prune(keep_last=keep_last, older_than_days=older_than)
    console.print(f"pruned {gone} run(s) from {store.where}", markup=False)


@history_app.command("export")
@guarded
def export_(
    folder: Annotated[Path, typer.Argument(help="The folder to write the profiles and history.json into.")],
    db: Db = None,
    debug: Debug = False,
) -> None:
    """Write every stored run as a profile file, with a manifest of its commit, branch, tags and predictions."""
    from aitune.history.exchange import export_history

    with _store(db) as store, _Progress(store.count(), "exporting") as advance:
        count = export_history(store, folder, progress=lambda _: advance())
    console.print(f"exported {count} run(s) to {folder}", markup=False)


@history_app.command("import")
@guarded
def import_(
    folder: Annotated[Path, typer.Argument(help="A folder `history export` wrote.")],
    db: Db = None,
    debug: Debug = False,
) -> None:
    """Add the runs of an exported folder to the history."""
    from aitune.history.exchange import import_history, read_manifest

    total = len(read_manifest(folder))
    with _store(db) as store, _Progress(total, "importing") as advance:
        count = import_history(store, folder, progress=lambda _: advance())
    console.print(f"imported {count} run(s) into {store.where}", markup=False)


def keep_in_history(paths: "list[Path]", db: str | None) -> str:
    """Store the profiles (or tune folder) that `capture`, `tune` or `compare` just read or wrote, as `history add`
    would, with git's commit and branch, skipping those already stored (`compare` of stored profiles adds
    nothing); the line that says so."""
    from aitune.history.provenance import commit_and_branch
    from aitune.history.record import record_of
    from aitune.history.sources import sources_of

    commit, branch = commit_and_branch(Path.cwd())
    added = known = 0
    with _store(db) as store:
        for path in paths:
            for source in sources_of(path):
                if _keep_once(store, record_of(source.document, commit=commit, branch=branch), source):
                    added += 1
                else:
                    known += 1
    stored = f" ({known} already there)" if known else ""
    return f"history:  {added} run(s) added to {store.where}{stored}"


def ledger_correction(doc: "Profile", db: str | None) -> tuple[Any, str | None]:
    """``suggest --ledger``: this machine's correction (`aitune.suggest.correction.LedgerCorrection`), or None
    with the sentence that says why not."""
    from aitune.history.ledger import ledger_row
    from aitune.history.outcomes import device_of
    from aitune.history.record import digest, machine_fields
    from aitune.suggest import LedgerCorrection
    from aitune.suggest.correction import MIN_VERIFIED

    device = device_of(doc)
    with _store(db) as store:
        found = [p for p in store.predictions(machine=digest(machine_fields(doc))) if p.device == device]
    row = ledger_row("all", device, found)
    if row.bias is None or row.count < MIN_VERIFIED:
        return None, (
            f"ledger: {row.count} verified tuning(s) on this machine, fewer than {MIN_VERIFIED}: "
            "the predictions are the gain model's alone."
        )
    return LedgerCorrection(row.bias, row.count), None


def _keep_once(store: "HistoryStore", record: Any, source: Any) -> bool:
    """Add the run unless it is stored already (True when added); its predictions go in once either way, so a
    tune folder whose profiles were kept by an earlier `compare` still fills the ledger."""
    from aitune.report.model import json_form

    run_id = store.stored_id(record)
    new = run_id is None
    if run_id is None:
        run_id = store.add(record, json_form(source.document))
    if new or not store.has_predictions(run_id):
        store.add_predictions(run_id, record.machine, source.predictions)
    return new


def _check_count(flag: str, value: int | None, least: int = 1) -> None:
    if value is not None and value < least:
        fail(f"{flag} must be at least {least} (got {value}).")


class _Progress:
    """Progress on stderr for `PROGRESS_FROM` items or more; ``advance()`` counts one. A terminal gets a bar; a
    log (a CI job's stderr is no terminal, where a bar draws nothing until it ends) a line at each tenth."""

    def __init__(self, total: int, verb: str) -> None:
        self.total, self.verb, self.bar, self.done = total, verb, None, 0

    def __enter__(self) -> Any:
        if self.total < PROGRESS_FROM:
            return lambda: None
        from rich.console import Console

        console = Console(stderr=True)
        if not console.is_terminal:
            return self._line
        from rich.progress import Progress

        self.bar = Progress(console=console, transient=True)
        self.bar.start()
        task = self.bar.add_task(self.verb, total=self.total)
        return lambda: self.bar.advance(task)  # type: ignore[union-attr]

    def _line(self) -> None:
        self.done += 1
        if self.done % max(1, self.total // 10) == 0 or self.done == self.total:
            print(f"{self.verb} {self.done}/{self.total}", file=sys.stderr, flush=True)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
