"""``aitune-profile``: capture, analyze, report, compare, suggest, validate, bundle, merge profiles in a shell or CI;
``history`` (`aitune.cli.history`) keeps them.

Every command parses its options, makes one core call, renders, and picks the exit code (see
`aitune.cli.edge`). Only ``capture`` imports torch, lazily: the other commands work without it.
"""

# No `from __future__ import annotations` here: Typer reads every command's annotations when it builds
# the command line, and string annotations would be compiled and evaluated again at every start.
import contextlib
import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

import aitune
from aitune.cli.console import console
from aitune.cli.edge import EXIT_GATE_FAILED, fail, guarded
from aitune.cli.history import HistoryDb, KeepInHistory, history_app

app = typer.Typer(
    name="aitune-profile",
    help="Profile PyTorch inference: where the time goes, and whether a change made it faster.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    # Click's plain help: Typer's rich help imports rich's Markdown parser, Pygments and its traceback
    # renderer, several times what the rest of `--help` costs.
    rich_markup_mode=None,
)


Debug = Annotated[bool, typer.Option("--debug", help="Show the full traceback of an error.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout, for machines.")]
ProfilePath = Annotated[Path, typer.Argument(help="A profile JSON written by capture or analyze.")]


@app.callback(invoke_without_command=True)
def _version(
    version: Annotated[bool, typer.Option("--version", help="Print aitune's version and exit.")] = False,
) -> None:
    if version:
        print(aitune.__version__)
        raise typer.Exit()


@app.command()
@guarded
def capture(
    target: Annotated[str, typer.Argument(help="app.py:infer or pkg.module:infer (entry mode), or app.py (script).")],
    script_args: Annotated[list[str] | None, typer.Argument(help="Script mode: arguments after --.")] = None,
    obj: Annotated[str | None, typer.Option(help="Global to discover regions under (default: all models).")] = None,
    input_name: Annotated[str | None, typer.Option("--input", help="Global holding the input.")] = None,
    warmup: Annotated[int, typer.Option(help="Unmeasured warmup calls.")] = 3,
    runs: Annotated[int, typer.Option(help="Measured calls.")] = 10,
    out: Annotated[Path | None, typer.Option(help="Output folder (default aitune_profiles/<target>-<time>).")] = None,
    no_trace: Annotated[bool, typer.Option("--no-trace", help="Do not keep the Chrome trace.")] = False,
    lite: Annotated[
        bool, typer.Option("--lite", help="Time regions and runs without the profiler (no operator table).")
    ] = False,
    operator_runs: Annotated[
        str | None,
        typer.Option(
            "--operator-runs",
            help="Trace operators in N runs of their own after the clock-timed measured runs, or in all measured "
            "runs (default: 2 on the CPU, all with CUDA or under torchrun).",
            metavar="N|all",
        ),
    ] = None,
    keep: KeepInHistory = False,
    history_db: HistoryDb = None,
    as_json: AsJson = False,
    debug: Debug = False,
) -> None:
    """Profile a function of a file or module (app.py:infer), or a whole script (app.py -- args)."""
    from aitune.cli import outputs

    _require_torch("capture")
    _check_run_counts(warmup, runs)
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
                operator_runs=_operator_runs(operator_runs),
            )
        else:
            written = outputs.capture_script_into(folder, Path(source), script_args or [], not no_trace)
    if keep:
        _keep([item.profile for item in written], history_db)
    if as_json:
        outputs.print_json({"output": str(folder), "profiles": [item.as_dict() for item in written]})
        return
    for item in written:
        _print_profile(item.doc)
        console.print(item.listing(), markup=False)


@app.command()
@guarded
def analyze(
    trace: Annotated[Path, typer.Argument(help="A Chrome trace saved by a capture (.json or .json.gz).")],
    out: Annotated[Path | None, typer.Option(help="Write profile.json and profile.md here.")] = None,
    as_json: AsJson = False,
    debug: Debug = False,
) -> None:
    """Re-derive the profile document from a saved Chrome trace (no torch needed)."""
    from aitune.cli import outputs
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


@app.command()
@guarded
def report(
    profile: ProfilePath,
    output_format: Annotated[str, typer.Option("--format", help="md, text, json or html.")] = "text",
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write the report to this file instead of stdout.")
    ] = None,
    debug: Debug = False,
) -> None:
    """Render a saved profile as text (terminal), Markdown, canonical JSON or one self-contained HTML file."""
    from aitune.report import dumps, load

    if output_format not in ("md", "text", "json", "html"):
        fail(f"unknown --format {output_format!r}; choose md, text, json or html.")
    if output_format == "text" and output is not None:
        fail("-o writes md, json or html; drop -o to see the text report, or add --format html.")
    if output is not None:
        from aitune.cli.outputs import refuse_overwriting_inputs

        refuse_overwriting_inputs({"-o": output}, [profile])
    doc = load(profile)
    if output_format == "md":
        from aitune.report import render_markdown

        _emit(render_markdown(doc).encode(), output)
    elif output_format == "json":
        _emit(dumps(doc), output)
    elif output_format == "html":
        from aitune.cli.pages import profile_page

        _emit(profile_page(doc).encode(), output)
    else:
        from aitune.cli.render import profile_view

        console.print(profile_view(doc))


def _emit(data: bytes, output: Path | None) -> None:
    """``data`` on stdout, or written whole to ``output`` (atomically: never a half-written file)."""
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    from aitune.report.io import write_atomic

    write_atomic(output, data)  # refuses a device or a pipe: a rename would replace it
    print(f"wrote {output} ({len(data) / 1e3:,.1f} kB)", file=sys.stderr)


@app.command()
@guarded
def compare(
    before: Annotated[Path, typer.Argument(help="The profile before the change, or the folder `tune` wrote.")],
    after: Annotated[Path | None, typer.Argument(help="The profile after the change (none for a tune folder).")] = None,
    scenario: Annotated[str | None, typer.Option(help="Compare this scenario of multi-scenario profiles.")] = None,
    domain: Annotated[
        str | None, typer.Option(help="Time domain: cpu or device (default: cpu; a tune folder's own).")
    ] = None,
    fail_if_slower: Annotated[
        float | None,
        typer.Option(help="Exit 1 when after is slower by more than PCT percent and beyond noise.", metavar="PCT"),
    ] = None,
    html: Annotated[
        Path | None, typer.Option("--html", help="Also write the comparison as one self-contained HTML file.")
    ] = None,
    keep: KeepInHistory = False,
    history_db: HistoryDb = None,
    as_json: AsJson = False,
    debug: Debug = False,
) -> None:
    """Per-region before/after medians, speedups with bootstrap confidence intervals, and an optional gate.

    BEFORE may be the folder `aitune-profile tune` wrote, with no AFTER: its two profiles are compared,
    and --html adds its tuned regions' predicted and realised gains.
    """
    from aitune.cli.render import diff_view
    from aitune.compare import compare_profiles, regressed
    from aitune.report import load

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
    diff = compare_profiles(old, new, domain=chosen, scenario=scenario)
    if html is not None:
        from aitune.cli.pages import pair_page

        names = str(before) if after is None else f"{before} → {after}"
        _emit(pair_page(old, new, diff, folder.report if folder else None, subtitle=names).encode(), html)
    failed = fail_if_slower is not None and regressed(diff, fail_if_slower)
    if keep:
        _keep([before] if after is None else [before, after], history_db)
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
    if failed:
        raise typer.Exit(EXIT_GATE_FAILED)


@app.command()
@guarded
def suggest(
    profile: ProfilePath,
    top: Annotated[int | None, typer.Option(help="Recommend at most K targets.", metavar="K")] = None,
    domain: Annotated[
        str | None, typer.Option(help="Time domain: cpu or device (default: device when the profile has it).")
    ] = None,
    scenario: Annotated[str | None, typer.Option(help="Suggest for this scenario of a multi-scenario profile.")] = None,
    precision: Annotated[
        str | None,
        typer.Option(
            help="Also forecast each target at bf16 or int8 on this machine, and flag the regions likely to fail "
            "the task gate (softmax/normalisation-heavy)."
        ),
    ] = None,
    ledger: Annotated[
        bool,
        typer.Option(
            "--ledger",
            help="Divide each prediction by the bias this machine's verified tunings showed (`history ledger`), "
            "when there are at least 3; says whether it did.",
        ),
    ] = False,
    history_db: HistoryDb = None,
    as_json: AsJson = False,
    debug: Debug = False,
) -> None:
    """Rank the regions worth tuning, with the end-to-end gain each could bring and the reasons why."""
    from aitune.cli.render import suggestions_view
    from aitune.report import load
    from aitune.suggest import suggest as suggest_targets

    if top is not None and top < 1:
        fail(f"--top must be at least 1 (got {top}); leave it out to list every target.")
    doc = load(profile)
    suggestions = suggest_targets(doc, top=top, domain=domain, scenario=scenario, precision=precision)
    if ledger:
        from aitune.cli.history import ledger_correction
        from aitune.suggest.correction import corrected

        correction, why_not = ledger_correction(doc, history_db)
        if correction is not None:
            suggestions = corrected(suggestions, correction)
        else:
            print(why_not, file=sys.stderr)
    if as_json:
        from aitune.cli import outputs

        outputs.print_json(suggestions.to_dict())
    else:
        console.print(suggestions_view(suggestions))


@app.command()
@guarded
def tune(
    target: Annotated[str, typer.Argument(help="app.py:infer or pkg.module:infer, as for capture.")],
    top: Annotated[int, typer.Option(help="Tune the K regions suggest ranks highest.", metavar="K")] = 3,
    targets: Annotated[
        str | None, typer.Option(help="Tune these paths instead (comma-separated, e.g. unet,vae).", metavar="PATHS")
    ] = None,
    mode: Annotated[str, typer.Option(help="aot (wrap and tune once) or jit (tune on the workload's calls).")] = "aot",
    strategy: Annotated[str, typer.Option(help="min-latency (fastest beating eager) or first-wins.")] = "min-latency",
    backends: Annotated[
        str | None, typer.Option(help="Candidate backends, comma-separated (default: all that run here).")
    ] = None,
    tolerance: Annotated[
        str | None, typer.Option(help="The gate's RTOL or RTOL,ATOL (default: per dtype).", metavar="RTOL[,ATOL]")
    ] = None,
    time_budget: Annotated[
        float | None,
        typer.Option(
            help="Bound the whole command (captures, recording, builds, checks, timing) to S seconds of wall "
            "clock: time for the after capture and verification is kept back from the start (twice what was "
            "spent before tuning), regions share the rest by the gain suggest predicts, backends go cheapest "
            "gain first, and those that would not fit are not tried, each with the reason. The captures "
            "themselves always run, so a budget below their time is exceeded by them alone.",
            metavar="S",
        ),
    ] = None,
    plan: Annotated[Path | None, typer.Option(help="Apply this plan.json instead of searching.")] = None,
    precision: Annotated[
        str,
        typer.Option(
            help="fp32 (default), bf16 or int8: a reduced precision brings its backends (bf16 weights cast once; "
            "int8 dynamic quantization of the linear layers), refused where this machine cannot run it fast, and "
            "keeps a region only if the workload's final output passes the task gate (see --quality).",
        ),
    ] = "fp32",
    quality: Annotated[
        str | None,
        typer.Option(
            help="The task gate's bar at a reduced precision, METRIC>=VALUE: top1_agreement, token_agreement, "
            "psnr_db or cosine (default: chosen from the output's kind, see docs/tuning.md).",
            metavar="METRIC>=VALUE",
        ),
    ] = None,
    obj: Annotated[str | None, typer.Option(help="Global to discover regions under (default: all models).")] = None,
    input_name: Annotated[str | None, typer.Option("--input", help="Global holding the input.")] = None,
    eval_inputs: Annotated[
        str | None,
        typer.Option(
            help="Global holding a list of further inputs, each in the form --input takes: at a reduced precision "
            "the task gate judges the output on each of them as well as on the recorded input.",
            metavar="GLOBAL",
        ),
    ] = None,
    warmup: Annotated[int, typer.Option(help="Unmeasured warmup calls per capture.")] = 3,
    runs: Annotated[int, typer.Option(help="Measured calls per capture.")] = 10,
    record: Annotated[int, typer.Option(help="Workload calls recorded for tuning.")] = 2,
    out: Annotated[Path | None, typer.Option(help="Output folder (default aitune_profiles/...-tuned-<time>).")] = None,
    no_trace: Annotated[bool, typer.Option("--no-trace", help="Do not keep the Chrome traces.")] = False,
    no_verify: Annotated[
        bool,
        typer.Option(
            "--no-verify",
            help="Keep what the trials chose without timing whole runs with and without it (a loss may be kept).",
        ),
    ] = False,
    cycle: Annotated[
        int,
        typer.Option(
            help="The workload's calls repeat every K calls (rotating prompts, lengths, batches): the end-to-end "
            "check times whole cycles on each side, so eager and tuned see the same calls.",
            metavar="K",
        ),
    ] = 1,
    keep: KeepInHistory = False,
    history_db: HistoryDb = None,
    as_json: AsJson = False,
    debug: Debug = False,
) -> None:
    """Capture, pick what to tune, tune it behind the correctness gate, capture again and compare.

    Before the second capture, whole runs with and without the tuned regions alternate in this
    process: a region stays tuned (and goes into plan.json) only if the run is faster with it
    beyond noise; the others are put back, and the output says so. A replayed --plan is checked
    the same way.
    """
    _require_torch("tune")
    _check_positive("--time-budget", time_budget, "seconds", "--time-budget 600")
    from aitune.cli import outputs
    from aitune.cli.loop import loop_files, loop_view, tune_entry_into
    from aitune.compare.quality import check_precision, parse_bar
    from aitune.compare.verification import MAX_CYCLE, VerifyConfig
    from aitune.torch.loop import LoopConfig
    from aitune.torch.tuning.budget import TimeBudget
    from aitune.torch.tuning.plan_check import load_plan
    from aitune.torch.tuning.strategies import named_strategy

    # The clock starts here, with the command: the budget bounds everything that follows.
    budget = TimeBudget(time_budget, reserve_factor=RESERVE_AFTER_TUNING) if time_budget is not None else None

    source, _, function = target.rpartition(":")
    if not function:
        fail(f"tune needs an entry function: write {target}:infer (the function that runs one inference).")
    _check_run_counts(warmup, runs)
    if mode not in ("aot", "jit"):
        fail(f"unknown --mode {mode!r}; choose aot or jit.")
    if top < 1 or record < 1:
        fail(f"--top and --record must be at least 1 (got --top {top}, --record {record}).")
    if not 1 <= cycle <= MAX_CYCLE:
        fail(f"--cycle takes the number of calls after which the workload repeats, 1 to {MAX_CYCLE} (got {cycle}).")
    check_precision(precision)
    for flag, given, role in (("--eval-inputs", eval_inputs, "feeds"), ("--quality", quality, "sets the bar of")):
        if given is not None and precision == "fp32" and plan is None:
            fail(f"{flag} {role} the task gate, which judges a reduced precision: pass --precision bf16 or int8.")
    bar = parse_bar(quality) if quality is not None else None
    config = LoopConfig(
        top=top,
        targets=tuple(_words(targets)) or None,
        mode=mode,
        strategy=named_strategy(strategy, _words(backends), _tolerance(tolerance), budget=budget, precision=precision),
        precision=precision,
        quality=bar,
        warmup_runs=warmup,
        measured_runs=runs,
        record_calls=record,
        verification=None if no_verify else VerifyConfig(cycle=cycle),
    )
    folder = out or outputs.default_folder(source, f"{function}-tuned")
    outputs.refuse_overwriting_inputs({"--out": loop_files(folder)}, [plan, Path(source)])
    checked = load_plan(plan) if plan is not None else None  # refused before the app is loaded or --out made
    with contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
        result, files = tune_entry_into(
            folder,
            source,
            function,
            obj=obj,
            input_name=input_name,
            eval_inputs_name=eval_inputs,
            config=config,
            plan=checked,
            keep_traces=not no_trace,
        )
    if keep:
        _keep([files.folder], history_db)
    if as_json:
        outputs.print_json({**files.as_dict(), "comparison": result.comparison()})
        return
    console.print(loop_view(result))
    console.print(files.listing(), markup=False)


@app.command()
@guarded
def validate(profile: ProfilePath, as_json: AsJson = False, debug: Debug = False) -> None:
    """Check a profile against the schema and its invariants; every problem with its JSON path (exit 1 if any)."""
    from aitune.report import read_json, written_by
    from aitune.report import validate as problems_of
    from aitune.report.io import check_profile_header
    from aitune.report.key_averages import AITUNE
    from aitune.report.safe_text import visible

    raw = read_json(profile)
    check_profile_header(raw, profile)
    problems = problems_of(raw)
    if as_json:
        from aitune.cli import outputs

        outputs.print_json({"path": str(profile), "valid": not problems, "problems": problems})
    elif problems:
        for problem in problems:  # one line each, however narrow the terminal: tools grep these
            console.print(visible(f"{profile}: {problem}"), markup=False, soft_wrap=True)
        console.print(f"{len(problems)} problem(s).")
    else:
        author = written_by(raw)
        label = "profile" if author == AITUNE else f"{author} profile"
        verdict = f"{profile}: valid {label} (schema_version {raw['schema_version']})."
        console.print(visible(verdict), markup=False, soft_wrap=True)
    if problems:
        raise typer.Exit(EXIT_GATE_FAILED)


@app.command()
@guarded
def bundle(
    profile: ProfilePath,
    output: Annotated[Path, typer.Option("-o", "--output", help="The zip to write.")],
    trace: Annotated[Path | None, typer.Option(help="Include this Chrome trace (gzipped).")] = None,
    max_mb: Annotated[float, typer.Option(help="Refuse to write a bundle bigger than this (MB).")] = 25.0,
    html: Annotated[
        bool, typer.Option("--html", help="Include report.html, the report any browser opens offline.")
    ] = False,
    debug: Debug = False,
) -> None:
    """Write a redacted, reproducible bug-report zip: profile, Markdown, environment, trace (and HTML report)."""
    _check_positive("--max-mb", max_mb, "megabytes", "--max-mb 25")
    from aitune.cli import outputs

    written = outputs.write_bundle(profile, output, trace, max_mb, html=html)
    console.print(f"bundle: {output} ({written / 1e6:.2f} MB)", markup=False)


@app.command()
@guarded
def merge(
    folder: Annotated[Path, typer.Argument(help="The folder a capture under torchrun wrote (rank0/, rank1/, …).")],
    out: Annotated[Path | None, typer.Option(help="Output folder (default DIR/merged).")] = None,
    as_json: AsJson = False,
    debug: Debug = False,
) -> None:
    """Merge the per-rank profiles of one distributed run into one document: ranks, imbalance, stragglers."""
    from aitune.cli import outputs
    from aitune.cli.render import ranks_view
    from aitune.report.merge import MERGED_FOLDER, merge_profiles, rank_profile_paths, rank_profiles

    target = out or folder / MERGED_FOLDER
    outputs.refuse_overwriting_inputs({"--out": outputs.profile_files(target)}, rank_profile_paths(folder))
    doc = merge_profiles(rank_profiles(folder))  # one rank in memory at a time; every check before a write
    written = outputs.write_profile_into(target, doc, exclusive=True)
    if as_json:
        outputs.print_json({"profile": str(written.profile), "markdown": str(written.markdown), "ranks": doc["ranks"]})
        return
    _print_profile(doc, ranks_view(doc))
    console.print(f"profile:  {written.profile}\nmarkdown: {written.markdown}", markup=False)


def _print_profile(doc: Any, *between: Any) -> None:
    """A written profile's summary, then ``between`` (a merged document's ranks), then its warnings."""
    from aitune.cli.render import profile_summary, warnings_table

    warnings = warnings_table(doc["warnings"])
    for part in (profile_summary(doc), *between, *([warnings] if warnings is not None else [])):
        console.print(part)


def _keep(paths: list[Path], db: str | None) -> None:
    """``--history``: the written profiles (or tune folder) kept in the history, said on stderr as a written file is."""
    from aitune.cli.history import keep_in_history

    print(keep_in_history(paths, db), file=sys.stderr)


def _require_torch(command: str) -> None:
    """One sentence, not an import traceback, on a machine without torch."""
    try:
        import torch  # noqa: F401
    except ImportError:
        fail(
            f"{command} needs PyTorch, which is not installed here; install torch, or use the commands "
            "that do not need it (analyze, report, compare, suggest, validate, bundle, merge)."
        )


def _operator_runs(given: str | None) -> int | str | None:
    """``--operator-runs``: ``all``, a count of at least 1, or None when not given."""
    if given is None or given == "all":
        return given
    if not (given.isascii() and given.isdigit()) or int(given) < 1:
        fail(f"--operator-runs must be all or a whole number of at least 1 (got {given!r}); --lite traces none.")
    return int(given)


def _check_run_counts(warmup: int, runs: int) -> None:
    """The flags' own names in the message (the Python API's check names its parameters)."""
    if warmup < 0 or runs < 1:
        fail(f"--warmup must be at least 0 and --runs at least 1 (got --warmup {warmup}, --runs {runs}).")


RESERVE_AFTER_TUNING = 2.0
"""--time-budget keeps back this many times the time spent before tuning: the after capture, then verification."""


def _check_positive(flag: str, value: float | None, unit: str, example: str) -> None:
    """NaN, infinities, zero and negatives are refused (``nan`` and ``-5`` parse as floats and meant nothing)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        fail(f"{flag} takes a finite number of {unit} above 0 (got {value:g}), e.g. {example}.")


def _words(text: str | None) -> list[str]:
    return [word.strip() for word in (text or "").split(",") if word.strip()]


def _tolerance(text: str | None) -> Any:
    """``--tolerance 1e-3`` or ``1e-3,1e-4`` as a `Tolerance`; None keeps the per-dtype defaults."""
    from aitune.torch.tuning.correctness import Tolerance

    if text is None:
        return None
    try:
        values = [float(word) for word in _words(text)]
    except ValueError:
        fail(f"--tolerance takes RTOL or RTOL,ATOL as numbers (got {text!r}), e.g. --tolerance 1e-3,1e-4.")
    if not 1 <= len(values) <= 2 or not all(0 <= value < float("inf") for value in values):
        fail(f"--tolerance takes one or two finite numbers of at least 0 (got {text!r}), e.g. --tolerance 1e-3.")
    return Tolerance(*values)


app.add_typer(history_app)


def main() -> None:
    """Console-script entry point."""
    app()
