"""What the commands write: capture folders (profile.json, profile.md, trace.json.gz), bundles, JSON on stdout.

Capture helpers import torch inside the function, so the other commands never load it. One rank of a
distributed launch (torchrun's ``RANK``/``WORLD_SIZE``) writes the same files into ``<out>/rank<r>/``,
with its own lock there, so the ranks never meet in one folder.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aitune import report
from aitune.errors import CaptureError, OutputError, ProfileError
from aitune.profiler_lines import without_profiler_lines
from aitune.report import ProfileDoc, dumps, save
from aitune.report.io import MAX_JSON_BYTES, cannot_write, gzipped, read_regular, write_atomic
from aitune.report.trace_writes import wait_for_traces

if TYPE_CHECKING:
    from rich.progress import Progress

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
    operator_runs: int | str | None = None,
) -> list[Written]:
    """Profile ``source:function`` with a progress bar and write its files into ``folder``; ``lite``: no
    profiler; ``operator_runs``: where operators are traced (see `aitune.torch.profile`)."""
    from aitune.torch.performance.capture import check_run_counts
    from aitune.torch.performance.entry import capture_entry

    check_run_counts(warmup, runs)
    folder = rank_folder(folder)
    trace = folder / TRACE_NAME if keep_trace else None
    with output_folder(folder, exclusive=True):
        with without_profiler_lines() as stderr, _progress(stderr) as progress:
            task = progress.add_task(f"{source}:{function}", total=warmup + runs)  # the whole count once warmed up

            def warmed_up(calls: int) -> None:  # warm-ups run until steady: the total is known only now
                progress.update(task, total=calls)

            prof = capture_entry(
                source,
                function,
                obj=obj,
                input_name=input_name,
                warmup_runs=warmup,
                measured_runs=runs,
                trace_file=trace,
                on_call=lambda: progress.advance(task),
                on_warmed_up=warmed_up,
                lite=lite,
                operator_runs=operator_runs,
            )
        return [write_profile(folder, prof.data, trace=trace)]


def capture_script_into(folder: Path, script: Path, args: list[str], keep_trace: bool) -> list[Written]:
    """Run ``script`` under capture and write every profile it made (or the whole-script one) into ``folder``."""
    from aitune.torch.performance.script import capture_script

    folder = rank_folder(folder)
    trace = folder / TRACE_NAME if keep_trace else None
    with output_folder(folder, exclusive=True):
        with without_profiler_lines():
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


def rank_folder(folder: Path) -> Path:
    """Where this process writes a capture: ``folder``, or ``folder/rank<r>`` for one rank of a distributed launch.

    The rank comes from the launcher's environment, as torchrun sets it, so the folder (and its lock)
    is known before the user's code runs.
    """
    from aitune.torch.performance.distributed import launched_rank

    launched = launched_rank()
    return folder if launched is None else folder / f"rank{launched.rank}"


def write_profile_into(folder: Path, doc: ProfileDoc, *, trace: Path | None = None, exclusive: bool = False) -> Written:
    """`write_profile` inside `output_folder`: on a failure the folder is left as it was."""
    with output_folder(folder, exclusive=exclusive):
        return write_profile(folder, doc, trace=trace)


def write_profile(folder: Path, doc: ProfileDoc, *, suffix: str = "", trace: Path | None = None) -> Written:
    """``profile<suffix>.json`` and ``profile<suffix>.md`` in ``folder``; ``trace`` is in place, or being
    written by the capture (waited for here, so the folder is complete when this returns)."""
    _make_folder(folder)
    if trace is not None:
        wait_for_traces(trace)
        doc = {**doc, "trace_file": trace.name}  # type: ignore[assignment]
    profile_path, markdown_path = profile_files(folder, suffix)
    profile = save(doc, profile_path)
    markdown = write_atomic(markdown_path, report.render_markdown(doc).encode())
    return Written(doc, profile, markdown, trace)


def profile_files(folder: Path, suffix: str = "") -> tuple[Path, Path]:
    """The profile JSON and its Markdown that `write_profile` writes in ``folder``."""
    return folder / f"profile{suffix}.json", folder / f"profile{suffix}.md"


def analyze_trace(trace: Path) -> ProfileDoc:
    """The profile document derived from a saved trace (aitune's, AITune 0.6's or a plain torch.profiler one).

    `ProfileError` when it holds no run marker.
    """
    # Torch-free, unlike aitune.torch.analyze_trace; `report.` loads the trace reader here, not at import.
    doc = report.build_profile(report.read_trace_file_events(trace), str(trace))
    return {**doc, "trace_file": trace.name}


def write_bundle(profile: Path, output: Path, trace: Path | None, max_mb: float, html: bool = False) -> int:
    """Write the bug-report zip of ``profile`` (and ``trace``, and with ``html`` its HTML report) to ``output``;
    returns its size in bytes."""
    from aitune.report import json_form, load
    from aitune.report.bundle import build_bundle

    refuse_overwriting_inputs({"-o": output}, [profile, trace])
    renderer = None
    if html:
        from aitune.cli.pages import profile_page

        renderer = profile_page
    doc = json_form(load(profile))  # the bundle redacts the document's JSON data
    archive = build_bundle(doc, report.read_trace(trace) if trace is not None else None, max_mb=max_mb, html=renderer)
    write_atomic(output, archive)
    return len(archive)


def gate_dict(pct: float | None, failed: bool) -> dict[str, Any] | None:
    """The gate's outcome for JSON output; ``None`` when no gate was asked for."""
    return None if pct is None else {"fail_if_slower_pct": pct, "failed": failed}


def print_json(data: Any) -> None:
    """``data`` as canonical JSON on stdout."""
    sys.stdout.write(dumps(data).decode())


def emit(data: bytes, output: Path | None) -> None:
    """``data`` on stdout, or written whole to ``output`` (atomically: never a half-written file)."""
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    write_atomic(output, data)  # refuses a device or a pipe: a rename would replace it
    print(f"wrote {output} ({len(data) / 1e3:,.1f} kB)", file=sys.stderr)


def _copy_trace(source: Path | None, target: Path) -> Path | None:
    """A trace the script kept, gzipped to ``target``; None when it kept none."""
    if source is None or not source.is_file():
        return None
    data = read_regular(source, MAX_JSON_BYTES)
    return write_atomic(target, data if source.suffix == ".gz" else gzipped(data))


def refuse_overwriting_inputs(outputs: Mapping[str, Path | Iterable[Path]], inputs: Iterable[Path | None]) -> None:
    """`OutputError` when a path a command writes (``outputs``: its flag → the file, or the files it writes
    in a folder) is one of the files it reads: the one check every command makes before it writes anything.

    The same file by any name counts: the same path, a link to it, a hard link (`same_file`). A command
    that replaced its own input would destroy the only copy of what it was asked to read.
    """
    sources = [source for source in inputs if source is not None]
    for flag, written in outputs.items():
        for target in [written] if isinstance(written, Path) else written:
            source = next((source for source in sources if same_file(source, target)), None)
            if source is not None:
                raise OutputError(
                    f"{flag} {target} would replace the input {source}; name another output so the input is kept."
                )


def same_file(first: Path, second: Path) -> bool:
    """Whether two existing paths name one file (one device and inode: a link or a hard link counts)."""
    try:
        return os.path.samefile(first, second)
    except (OSError, ValueError):  # one does not exist (yet), or is a name no file can have: not one file
        return False


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise OutputError(f"cannot create the output folder {folder}: {cannot_write(folder, error)}") from None


LOCK_NAME = ".aitune-capture.lock"
"""Held in an output folder while a command writes there, so two captures cannot share one --out.
It holds ``<pid> <host>`` of the process that took it, so a lock left by a killed one is recognised."""

ENDING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))
"""Signals that end a command (a launcher's SIGTERM, a closed terminal's SIGHUP): like Ctrl-C (SIGINT),
they unwind the command so that its output folder is cleaned up, instead of killing it mid-write."""


class Stopped(BaseException):
    """An ending signal arrived: a BaseException (as Ctrl-C's KeyboardInterrupt), so no ``except Exception``
    in the user's code swallows it and every ``finally`` runs; `output_folder` then exits with the shell's
    code, 128 + the signal's number."""

    def __init__(self, number: int) -> None:
        super().__init__(number)
        self.code = 128 + number
        self.reason = f"stopped by {signal.Signals(number).name}"


@contextmanager
def output_folder(folder: Path, exclusive: bool = False) -> Iterator[None]:
    """``folder`` exists in the block; when the block fails (an error, Ctrl-C, SIGTERM), the folder is left
    as it was before: the folders made here go, and so does what the block added to one that existed.

    ``exclusive``: refuse a folder that already holds a profile, or that another capture is writing.
    A folder that is a link is refused (what is written must land where ``--out`` says). Only folders
    this call itself created (``mkdir`` succeeded) are removed, so a command that loses a race for a new
    folder never removes the winner's.
    """
    if folder.is_symlink():
        raise OutputError(f"{folder} is a link; pass a real folder as the output (links are not followed).")
    made = _make_folders(folder)
    lock = folder / LOCK_NAME
    held = False
    before: set[str] = set()
    try:
        with _signals_unwind():
            if exclusive:
                _take(lock, folder)
                held = True
            before = {entry.name for entry in _entries(folder)}
            yield
    except BaseException as error:
        if held or (made and not exclusive):  # a lock lost to another process: its folder, not ours
            _remove_added(folder, before | {LOCK_NAME})
        if held:
            lock.unlink(missing_ok=True)
            held = False
        for path in reversed(made):  # deepest first; a folder another process wrote into stays
            with suppress(OSError):
                path.rmdir()
        if isinstance(error, Stopped):
            sys.stderr.write(f"[error] {error.reason}; {folder} is left as it was before.\n")
            raise SystemExit(error.code) from None
        raise
    finally:
        if held:
            lock.unlink(missing_ok=True)


def _make_folders(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; the ones this call created, outermost first."""
    missing = [path for path in reversed([folder, *folder.parents]) if not path.exists()]
    made = []
    try:
        for path in missing:
            try:
                path.mkdir()
                made.append(path)
            except FileExistsError:
                if not path.is_dir():
                    raise
    except OSError as error:
        for path in reversed(made):
            with suppress(OSError):
                path.rmdir()
        raise OutputError(f"cannot create the output folder {folder}: {cannot_write(folder, error)}") from None
    return made


def _entries(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError:
        return []


def _remove_added(folder: Path, kept: set[str]) -> None:
    """Remove what is in ``folder`` but not in ``kept`` (links themselves, never what they point to)."""
    for entry in _entries(folder):
        if entry.name in kept:
            continue
        with suppress(OSError):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink()


@contextmanager
def _signals_unwind() -> Iterator[None]:
    """In the block, `ENDING_SIGNALS` raise `Stopped` (main thread only; elsewhere signals cannot be caught)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(number: int, _frame: Any) -> None:
        raise Stopped(number)

    previous = {number: signal.signal(number, stop) for number in ENDING_SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _take(lock: Path, folder: Path) -> None:
    """Create ``lock`` or refuse: the folder is another capture's (alive or killed), or holds a finished one."""
    owner = f"{os.getpid()} {socket.gethostname()}\n".encode()
    try:
        descriptor = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except FileExistsError:
        raise CaptureError(_held_by(lock, folder)) from None
    except OSError as error:
        raise OutputError(cannot_write(lock, error)) from None
    with os.fdopen(descriptor, "wb") as stream:
        stream.write(owner)
    if any(folder.glob("profile*.json")) or (folder / "before").exists():
        lock.unlink()
        raise CaptureError(f"{folder} already holds a profile; pass another --out, or remove that folder first.")


def _held_by(lock: Path, folder: Path) -> str:
    """The sentence for a lock that exists: whose it is, and whether that process still runs."""
    try:
        pid_text, host = read_regular(lock, 200).decode().split()
        pid = int(pid_text)
    except (ProfileError, UnicodeDecodeError, ValueError):
        pid, host = None, ""
    if pid is None or host != socket.gethostname():
        return (
            f"{folder} is being written by another capture (or one that was killed: delete {lock}); pass another --out."
        )
    if _alive(pid):
        return f"{folder} is being written by another capture (process {pid}); wait for it, or pass another --out."
    return (
        f"{folder} holds a stale lock of process {pid}, which no longer runs (it was killed): delete {lock} "
        "and run again, or pass another --out."
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _progress(stream: Any) -> Progress:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("capturing {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(file=stream),
        transient=True,
        disable=not stream.isatty(),  # logs and pipes get the summary only
    )
