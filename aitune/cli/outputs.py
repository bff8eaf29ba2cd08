"""What the commands write: capture folders (profile.json, profile.md, trace.json.gz), bundles, JSON on stdout.

Capture helpers import torch inside the function, so the other commands never load it.
"""

from __future__ import annotations

import gzip
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from aitune.cli.edge import without_profiler_lines
from aitune.errors import CaptureError
from aitune.report import ProfileDoc, build_profile, dumps, read_trace, render_markdown, save

TRACE_NAME = "trace.json.gz"


@dataclass(frozen=True)
class Written:
    """One profile written to disk: its document and the paths of its files."""

    doc: ProfileDoc
    profile: Path
    markdown: Path
    trace: Path | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "profile": str(self.profile),
            "markdown": str(self.markdown),
            "trace": str(self.trace) if self.trace else None,
        }

    def listing(self) -> str:
        """The paths, one per line, for the terminal."""
        lines = [f"profile:  {self.profile}", f"markdown: {self.markdown}"]
        lines.append(f"trace:    {self.trace}" if self.trace else "trace:    (not kept)")
        return "\n".join(lines)


def default_folder(source: str, function: str) -> Path:
    """``aitune_profiles/<stem>-<function or script>-<local time>``."""
    stem = Path(source).stem if source.endswith(".py") else source.rsplit(".", 1)[-1]
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("aitune_profiles") / f"{stem}-{function or 'script'}-{stamp}"


def capture_entry_into(
    folder: Path,
    source: str,
    function: str,
    obj: str | None,
    input_name: str | None,
    warmup: int,
    runs: int,
    keep_trace: bool,
    *,
    lite: bool = False,
) -> list[Written]:
    """Profile ``source:function`` with a progress bar and write its files into ``folder``; ``lite``: no profiler."""
    from aitune.torch.performance.capture import check_run_counts
    from aitune.torch.performance.entry import capture_entry

    check_run_counts(warmup, runs)
    trace = folder / TRACE_NAME if keep_trace else None
    with output_folder(folder), without_profiler_lines() as stderr, _progress(stderr) as progress:
        task = progress.add_task(f"{source}:{function}", total=warmup + 1 + runs)  # +1: the profiler's warmup
        prof = capture_entry(
            source,
            function,
            obj=obj,
            input_name=input_name,
            warmup_runs=warmup,
            measured_runs=runs,
            trace_file=trace,
            on_call=lambda: progress.advance(task),
            lite=lite,
        )
    return [write_profile(folder, prof.data, trace=trace)]


def capture_script_into(folder: Path, script: Path, args: list[str], keep_trace: bool) -> list[Written]:
    """Run ``script`` under capture and write every profile it made (or the whole-script one) into ``folder``."""
    from aitune.torch.performance.script import capture_script

    trace = folder / TRACE_NAME if keep_trace else None
    with output_folder(folder), without_profiler_lines():
        result = capture_script(script, args, trace_file=trace)
    if not result.profiles:
        raise CaptureError(
            f"{script} imports aitune but made no profile; call aitune.torch.profile(...) in it, "
            "or capture an entry function (app.py:infer)."
        )
    if result.whole_script:
        return [write_profile(folder, result.profiles[0].data, trace=trace)]
    written = []
    for index, prof in enumerate(result.profiles, start=1):
        suffix = f"-{index}" if len(result.profiles) > 1 else ""
        trace = _copy_trace(prof.trace_file, folder / f"trace{suffix}.json.gz") if keep_trace else None
        written.append(write_profile(folder, prof.data, suffix=suffix, trace=trace))
    return written


def write_profile(folder: Path, doc: ProfileDoc, *, suffix: str = "", trace: Path | None = None) -> Written:
    """``profile<suffix>.json`` and ``profile<suffix>.md`` in ``folder``; ``trace`` is already in place."""
    _make_folder(folder)
    if trace is not None:
        doc = {**doc, "trace_file": trace.name}  # type: ignore[assignment]
    profile = save(doc, folder / f"profile{suffix}.json")
    markdown = folder / f"profile{suffix}.md"
    markdown.write_text(render_markdown(doc))
    return Written(doc, profile, markdown, trace)


def analyze_trace(trace: Path) -> ProfileDoc:
    """The profile document derived from a saved trace (aitune's, AITune 0.6's or a plain torch.profiler one).

    `ProfileError` when it holds no run marker.
    """
    doc = build_profile(read_trace(trace), str(trace))  # torch-free, unlike aitune.torch.analyze_trace
    doc["trace_file"] = trace.name
    return doc


def write_bundle(profile: Path, output: Path, trace: Path | None, max_mb: float) -> int:
    """Write the bug-report zip of ``profile`` (and ``trace``) to ``output``; returns its size in bytes."""
    from aitune.errors import BundleError
    from aitune.report import load
    from aitune.report.bundle import build_bundle

    archive = build_bundle(load(profile), read_trace(trace) if trace is not None else None, max_mb=max_mb)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_bytes(archive)
    except OSError as error:
        raise BundleError(f"cannot write {output} ({error.strerror}); choose a writable path with -o.") from None
    return len(archive)


def gate_dict(pct: float | None, failed: bool) -> dict[str, Any] | None:
    """The gate's outcome for JSON output; ``None`` when no gate was asked for."""
    return None if pct is None else {"fail_if_slower_pct": pct, "failed": failed}


def print_json(data: Any) -> None:
    """``data`` as canonical JSON on stdout."""
    sys.stdout.write(dumps(data).decode())


def _copy_trace(source: Path | None, target: Path) -> Path | None:
    """A trace the script kept, gzipped to ``target``; None when it kept none."""
    if source is None or not source.is_file():
        return None
    if source.suffix == ".gz":
        shutil.copyfile(source, target)
    else:
        target.write_bytes(gzip.compress(source.read_bytes(), mtime=0))
    return target


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CaptureError(
            f"cannot create the output folder {folder} ({error.strerror}); pass a writable --out."
        ) from None


@contextmanager
def output_folder(folder: Path) -> Iterator[None]:
    """``folder`` exists in the block; one made here is removed again when the block fails and left it empty."""
    created = not folder.exists()
    _make_folder(folder)
    try:
        yield
    except BaseException:
        if created and not any(folder.iterdir()):
            folder.rmdir()
        raise


def _progress(stream: Any) -> Progress:
    return Progress(
        TextColumn("capturing {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(file=stream),
        transient=True,
        disable=not stream.isatty(),  # logs and pipes get the summary only
    )
