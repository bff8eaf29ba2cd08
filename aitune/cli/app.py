"""``aitune-profile``: capture, analyze, report, compare, suggest, validate, bundle, merge profiles in a shell or CI;
``history`` (`aitune.cli.history`) keeps them.

The Typer wiring alone: every command parses its options and hands them to the module of its job
(`capture.py`, `report.py`, `compare.py`, `suggest.py`, `tune.py`), which makes the core call and renders; a
failed gate is exit code 1 here, bad input exit 2 (`aitune.cli.edge`), and flag values are checked in
`aitune.cli.options`. Only ``capture`` and ``tune`` import torch, lazily: the other commands work without it.
"""

# No `from __future__ import annotations` here: Typer reads every command's annotations when it builds
# the command line, and string annotations would be compiled and evaluated again at every start.
from pathlib import Path
from typing import Annotated

import typer

import aitune
from aitune.cli.console import console
from aitune.cli.edge import EXIT_GATE_FAILED, guarded
from aitune.cli.history import HistoryDb, KeepInHistory, history_app
from aitune.cli.options import AsJson, Debug, ProfilePath, check_positive

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
    from aitune.cli.capture import capture_target

    capture_target(
        target, script_args, obj=obj, input_name=input_name, warmup=warmup, runs=runs, out=out, no_trace=no_trace,
        lite=lite, operator_runs=operator_runs, keep=keep, history_db=history_db, as_json=as_json,
    )  # fmt: skip


@app.command()
@guarded
def analyze(
    trace: Annotated[Path, typer.Argument(help="A Chrome trace saved by a capture (.json or .json.gz).")],
    out: Annotated[Path | None, typer.Option(help="Write profile.json and profile.md here.")] = None,
    as_json: AsJson = False,
    debug: Debug = False,
) -> None:
    """Re-derive the profile document from a saved Chrome trace (no torch needed)."""
    from aitune.cli.capture import analyze_trace_file

    analyze_trace_file(trace, out=out, as_json=as_json)


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
    from aitune.cli.report import report_profile

    report_profile(profile, output_format=output_format, output=output)


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
    from aitune.cli.compare import compare_pair

    failed = compare_pair(
        before, after, scenario=scenario, domain=domain, fail_if_slower=fail_if_slower, html=html, keep=keep,
        history_db=history_db, as_json=as_json,
    )  # fmt: skip
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
    from aitune.cli.suggest import print_suggestions

    print_suggestions(
        profile, top=top, domain=domain, scenario=scenario, precision=precision, ledger=ledger, history_db=history_db,
        as_json=as_json,
    )  # fmt: skip


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
    from aitune.cli.tune import TuneFlags, tune_target

    flags = TuneFlags(
        top=top, targets=targets, mode=mode, strategy=strategy, backends=backends, tolerance=tolerance,
        time_budget=time_budget, plan=plan, precision=precision, quality=quality, obj=obj, input_name=input_name,
        eval_inputs=eval_inputs, warmup=warmup, runs=runs, record=record, out=out, no_trace=no_trace,
        no_verify=no_verify, cycle=cycle,
    )  # fmt: skip
    tune_target(target, flags, keep=keep, history_db=history_db, as_json=as_json)


@app.command()
@guarded
def validate(profile: ProfilePath, as_json: AsJson = False, debug: Debug = False) -> None:
    """Check a profile against the schema and its invariants; every problem with its JSON path (exit 1 if any)."""
    from aitune.cli.report import validate_profile

    if not validate_profile(profile, as_json=as_json):
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
    check_positive("--max-mb", max_mb, "megabytes", "--max-mb 25")
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
    from aitune.cli.capture import merge_ranks

    merge_ranks(folder, out=out, as_json=as_json)


app.add_typer(history_app)


def main() -> None:
    """Console-script entry point."""
    app()
