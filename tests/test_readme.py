"""The README's and the docs' examples run as shown: every fenced block is executed and its shown output checked.

The pages run in `PAGES` order, README first: the reference pages under ``docs/`` carry most examples.

How a block is read (the convention for whoever adds a README section):

- A ```` ```text ````/```` ```bash ```` block whose lines start with ``$ `` is a terminal session: each
  ``$ command`` runs with bash in a temporary copy of the repository (the README's working
  directory), stdout and stderr together, and the lines under it up to the next ``$`` are its
  output. A last line ``exit N`` is the exit status it must have; without one the status is not
  checked (the output is), except that a command with nothing shown under it must exit 0, its
  output not compared. A line ``...`` stands for any lines, zero or more.
- A ```` ```bash ```` block without ``$`` lines is a script: it runs whole (``set -euo pipefail``) and
  must succeed. A ```` ```python ```` block runs as a script from the copy's root, ``examples/`` on
  the path (``PYTHONPATH=examples``), and must succeed. Other blocks (``text`` without ``$``, tables) are not run.
- Blocks run in page order and share the copy, so a block may read what an earlier one wrote
  (``./scripts/demo.sh``'s ``demo_out/``). Commands find ``aitune-profile``, ``python`` and
  ``panel`` on the PATH, as after ``source .venv/bin/activate``; output goes to a pipe, so tables
  are 200 columns wide (COLUMNS unset); ``OMP_NUM_THREADS`` is 1 unless set. ``scripts/setup.sh``
  and ``scripts/test.sh`` are the steps left out: in the copy they are no-ops, since one would
  pip-install into the environment running the tests and the other would start this suite again.
- A line ``<!-- readme-test: skip (reason) -->`` right before a block keeps it from running
  (a GPU, a server that never exits, the whole suite); ``<!-- readme-test: slow (reason) -->``
  runs it only with ``AITUNE_README_SLOW=1`` (builds that take minutes here).

What legitimately varies is normalised away on both sides before comparing, and nothing else:
every number becomes ``#`` (timings, shares, counts, dates, versions, sizes); box-drawing
characters are dropped and the output is compared word by word, so column widths and line
wrapping do not matter; the rows of each table are compared as a set (their order follows
measured times); the rows of the warnings that depend on the machine's load (``TIMING_WARNINGS``)
are left out of a Warnings table (and the table, when nothing else is in it); Kineto's
``profiler_start``/``profiler_stop`` lines are dropped. What the load decides beyond that (a
reason or an advice line of ``suggest``) is a ``...`` in the README, said in its text.

``python tests/test_readme.py`` runs the blocks as the test does (slow ones with
``AITUNE_README_SLOW=1``) and prints each command's real output; with ``--write`` it also puts that
output into each page under every command that shows some (blocks with a ``...`` line are left to you).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from aitune.profiler_lines import PROFILER_LINE

ROOT = Path(__file__).resolve().parent.parent
PAGES = tuple(
    ROOT / name
    for name in (
        "README.md",
        "docs/untrusted-files.md",
        "docs/commands.md",
        "docs/attribution.md",
        "docs/distributed.md",
        "docs/profile-document.md",
        "docs/performance.md",
        "docs/tuning.md",
        "docs/viewer.md",
        "docs/history.md",
    )
)
"""The pages whose examples run, in the order they run: a later page may read what an earlier one wrote."""

pytestmark = pytest.mark.slow

TIMING_WARNINGS = ("RUN_OUTLIERS", "HIGH_RUN_VARIANCE", "INSTRUMENTATION_OVERHEAD")
ANY_LINES = "..."
_FENCE = re.compile(r"^```(\w*)\s*$")
_WARNINGS_TITLE = re.compile(r"Warnings( only (before|after))?")
"""A Warnings table's title: a profile's, or compare's of the warnings one side has."""
_MARKER = re.compile(r"^<!-- readme-test: (skip|slow) \((.+)\) -->$")
_EXIT = re.compile(r"^exit (\d+)$")
_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")
_BOX = re.compile(r"[\u2500-\u257f]")


@dataclass(frozen=True)
class Command:
    """One ``$ command`` of a session block, with the output and exit status shown under it."""

    text: str
    shown: tuple[str, ...]
    exit_code: int | None  # None: not shown, and not checked


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: where it starts (1-based line), its language and its lines."""

    line: int
    lang: str
    lines: tuple[str, ...]
    marker: tuple[str, str] | None = None
    commands: tuple[Command, ...] = field(default=())
    page: str = "README.md"  # relative to the repository root

    @property
    def kind(self) -> str | None:
        """``session``, ``script`` or ``python`` for a block that runs; None for one that does not."""
        if self.commands:
            return "session"
        if self.lang == "bash":
            return "script"
        return "python" if self.lang == "python" else None


def read_blocks(text: str, page: str = "README.md") -> list[Block]:
    """Every fenced block of a Markdown text, with the marker line right before it, if any."""
    blocks, lines, index = [], text.splitlines(), 0
    while index < len(lines):
        opened = _FENCE.match(lines[index])
        if not opened:
            index += 1
            continue
        end = lines.index("```", index + 1)
        body = tuple(lines[index + 1 : end])
        before = next((line for line in reversed(lines[:index]) if line.strip()), "")
        marker = _MARKER.match(before.strip())
        blocks.append(
            Block(
                line=index + 1,
                lang=opened.group(1),
                lines=body,
                marker=(marker.group(1), marker.group(2)) if marker else None,
                commands=read_session(body) if opened.group(1) in ("text", "bash", "console") else (),
                page=page,
            )
        )
        index = end + 1
    return blocks


def read_session(lines: tuple[str, ...]) -> tuple[Command, ...]:
    """The ``$ command`` lines of a block with the output shown under each; empty when there are none."""
    commands: list[tuple[str, list[str]]] = []
    for line in lines:
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands:
            commands[-1][1].append(line)
    result = []
    for text, shown in commands:
        shown = _trimmed(shown)
        status = _EXIT.match(shown[-1].strip()) if shown else None
        if status:
            shown = _trimmed(shown[:-1])
        exit_code = int(status.group(1)) if status else None if shown else 0
        result.append(Command(text, tuple(shown), exit_code))
    return tuple(result)


def _trimmed(lines: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def normalised(output: str) -> list[str]:
    """The lines of ``output`` with what legitimately varies taken out (see the module docstring)."""
    lines = [line for line in output.splitlines() if not PROFILER_LINE.match(line.encode())]
    lines = _without_timing_warnings(lines)
    lines = _rows_sorted(lines)
    result = []
    for line in lines:
        if line.strip() == ANY_LINES:
            result.append(ANY_LINES)
            continue
        words = " ".join(_BOX.sub(" ", _NUMBER.sub("#", line)).split())
        if words:
            result.append(words)
    return result


def _without_timing_warnings(lines: list[str]) -> list[str]:
    """Drop the load-dependent rows of every Warnings table (compare's one-sided ones too), and a table they were
    all of."""
    kept: list[str] = []
    index = 0
    while index < len(lines):
        if _WARNINGS_TITLE.match(lines[index].strip()) and index + 1 < len(lines) and lines[index + 1].startswith("┏"):
            end = next((i for i in range(index + 1, len(lines)) if lines[i].startswith("└")), len(lines) - 1)
            table = lines[index : end + 1]
            body = [row for row in _rows(table) if _first_cell(row[0]) not in TIMING_WARNINGS]
            if body:
                kept += [line for line in table if not line.startswith("│")][:-1]
                kept += [line for row in body for line in row] + [table[-1]]
            index = end + 1
        else:
            kept.append(lines[index])
            index += 1
    return kept


def _first_cell(line: str) -> str:
    return line.split("│")[1].strip() if line.count("│") >= 2 else ""


def _rows(lines: list[str]) -> list[list[str]]:
    """The body rows of a table's lines, each a row's first line and the lines its wrapped cells take."""
    rows: list[list[str]] = []
    for line in lines:
        if not line.startswith("│"):
            continue
        if _first_cell(line) or not rows:
            rows.append([line])
        else:
            rows[-1].append(line)
    return rows


def _rows_sorted(lines: list[str]) -> list[str]:
    """Each table's body rows in a fixed order (by their normalised text): the README's order follows timings."""
    result: list[str] = []
    index = 0
    while index < len(lines):
        if not lines[index].startswith("│"):
            result.append(lines[index])
            index += 1
            continue
        end = index
        while end < len(lines) and lines[end].startswith("│"):
            end += 1
        rows = _rows(lines[index:end])
        result += [line for row in sorted(rows, key=_row_key) for line in row]
        index = end
    return result


def _row_key(row: list[str]) -> str:
    return " ".join(_BOX.sub(" ", _NUMBER.sub("#", " ".join(row))).split())


def words(lines: list[str]) -> list[str]:
    """The words of normalised lines, a ``...`` line kept as one: compared word by word, wrapping cannot differ."""
    return [word for line in lines for word in ([line] if line == ANY_LINES else line.split())]


def matches(shown: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` is ``shown`` item for item, where a ``...`` item of ``shown`` stands for any items."""
    at, seen, resume = 0, 0, None  # resume: after the last ``...``, and where in ``actual`` it stopped absorbing
    while seen < len(actual):
        if at < len(shown) and shown[at] == ANY_LINES:
            resume, at = (at + 1, seen), at + 1
        elif at < len(shown) and shown[at] == actual[seen]:
            at, seen = at + 1, seen + 1
        elif resume is not None:  # let the last ``...`` absorb one item more
            at, seen = resume[0], resume[1] + 1
            resume = (at, seen)
        else:
            return False
    return all(item == ANY_LINES for item in shown[at:])


def make_workspace(folder: Path) -> Path:
    """A copy of the repository's files (tracked and new, none ignored), set-up and suite no-ops, ``.venv`` this one."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, files.split("\0")):
        source = ROOT / name
        if source.is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)
    (folder / "scripts" / "setup.sh").write_text("#!/usr/bin/env bash\n# the README test's copy: already set up\n")
    # This test runs inside the suite: the README's own test command must not start the suite again.
    (folder / "scripts" / "test.sh").write_text("#!/usr/bin/env bash\n# the README test's copy: the suite is running\n")
    (folder / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    return folder


def environment(workspace: Path) -> dict[str, str]:
    """The README's shell: the environment's tools first on the PATH, the copy's code on the Python path, a pipe."""
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join((str(Path(sys.executable).parent), env.get("PATH", "")))
    env["PYTHONPATH"] = str(workspace)
    # One OpenMP thread per process: on a shared machine two threads per capture contend with other jobs
    # and stretch the runs tenfold (timings are normalised away, the suite's runtime is not).
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def run_shell(script: str, workspace: Path) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with bash in ``workspace``, stderr into stdout as a terminal shows them."""
    return subprocess.run(
        ["bash", "-c", script],
        cwd=workspace,
        env=environment(workspace),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=900,
    )


def run_python(block: Block, workspace: Path) -> subprocess.CompletedProcess[str]:
    """Run a Python block as ``PYTHONPATH=examples python`` from the copy's root would, in a process of its own.

    A process of its own, not ``exec``: a block may leave state behind (wrappers registered, JIT
    interception on), as a user's session would, and the suite's guards would blame the test.
    """
    env = environment(workspace)
    env["PYTHONPATH"] = os.pathsep.join((str(workspace / "examples"), env["PYTHONPATH"]))
    return subprocess.run(
        [sys.executable, "-"],
        input="\n".join(block.lines),
        cwd=workspace,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=900,
    )


def run_script(block: Block, workspace: Path) -> subprocess.CompletedProcess[str]:
    """Run a bash block whole, stopping at the first failing command."""
    return run_shell("set -euo pipefail\n" + "\n".join(block.lines), workspace)


def shown_mismatch(command: Command, result: subprocess.CompletedProcess[str], workspace: Path) -> str | None:
    """What is wrong with a command's run against what the README shows; None when nothing is."""
    output = result.stdout.replace(f"{workspace}{os.sep}", "")
    if command.exit_code is not None and result.returncode != command.exit_code:
        return f"$ {command.text}\nexited {result.returncode}, the README shows {command.exit_code}:\n{output}"
    if command.shown and not matches(words(normalised("\n".join(command.shown))), words(normalised(output))):
        shown, actual = "\n".join(normalised("\n".join(command.shown))), "\n".join(normalised(output))
        return f"$ {command.text}\nshown (normalised):\n{shown}\nprinted (normalised):\n{actual}\nprinted:\n{output}"
    return None


BLOCKS = [
    block
    for page in PAGES
    for block in read_blocks(page.read_text(encoding="utf-8"), str(page.relative_to(ROOT)))
    if block.kind
]


def _param(block: Block) -> object:
    marks = []
    if block.marker and block.marker[0] == "skip":
        marks.append(pytest.mark.skip(reason=block.marker[1]))
    elif block.marker and block.marker[0] == "slow":
        marks.append(pytest.mark.skipif(not os.environ.get("AITUNE_README_SLOW"), reason=block.marker[1]))
    return pytest.param(block, id=f"{block.page}:{block.line}", marks=marks)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """One copy of the repository for every block, in page order."""
    return make_workspace(tmp_path_factory.mktemp("readme"))


@pytest.mark.parametrize("block", [_param(block) for block in BLOCKS])
def test_a_readme_example_runs_and_prints_what_it_shows(block, workspace):
    if block.kind in ("python", "script"):
        result = run_python(block, workspace) if block.kind == "python" else run_script(block, workspace)
        assert result.returncode == 0, result.stdout
    else:
        runs = [(command, run_shell(command.text, workspace)) for command in block.commands]
        problems = [shown_mismatch(command, result, workspace) for command, result in runs]
        assert not any(problems), "\n\n".join(filter(None, problems))


# --- the reader and the normalisation themselves ---


def test_a_session_block_splits_into_commands_with_their_output_and_exit_status():
    text = "<!-- readme-test: skip (needs a GPU) -->\n```text\n$ a --x\nline 1\n\nexit 1\n$ b\n$ c\nout\n```\n"

    (block,) = read_blocks(text)

    assert block.marker == ("skip", "needs a GPU")
    assert block.commands == (
        Command("a --x", ("line 1",), 1),
        Command("b", (), 0),
        Command("c", ("out",), None),
    )


def test_numbers_widths_and_row_order_do_not_count_but_words_do():
    shown = "┃ Region ┃ ms ┃\n│ unet     │ 179.685 │\n│ vae      │  15.749 │\nrun time: median 199.899 ms\n"
    printed = "┃ Region ┃ ms   ┃\n│ vae  │ 1,461.444 │\n│ unet │ 9.1 │\nrun time: median 54.139 ms\n"

    assert normalised(shown) == normalised(printed)
    assert normalised(shown) != normalised(printed.replace("median", "mean"))


def test_a_line_wrapped_elsewhere_is_the_same_words():
    assert words(normalised("predicted 1.426× end to end (1.51× for\nit), at most 8.511×.")) == words(
        normalised("predicted 1.4× end to end\n(1.5× for it), at most 8.5×.")
    )


def test_load_dependent_warnings_are_left_out_and_others_kept():
    table = (
        "Warnings\n┏━━━━━━┳━━━━━┓\n┃ Code ┃ Msg ┃\n┡━━━━━━╇━━━━━┩\n"
        "│ RUN_OUTLIERS │ run(s) 8 │\n│              │ slow     │\n│ {other} │ x │\n└──────┴─────┘\nprofile: p.json\n"
    )

    assert normalised(table.replace("│ {other} │ x │\n", "")) == ["profile: p.json"]
    assert "SINGLE_RUN_SCRIPT_CAPTURE x" in normalised(table.format(other="SINGLE_RUN_SCRIPT_CAPTURE"))
    # compare's tables of the warnings one side has: a RUN_OUTLIERS that only load raised changed its output
    only_after = table.replace("Warnings\n", "Warnings only after\n").replace("│ {other} │ x │\n", "")
    assert normalised("gate --fail-if-slower 5: passed\n" + only_after) == [
        "gate --fail-if-slower #: passed",
        "profile: p.json",
    ]


def test_an_ellipsis_line_stands_for_any_lines_and_nothing_else_does():
    assert matches(["a", ANY_LINES, "d"], ["a", "b", "c", "d"])
    assert matches(["a", ANY_LINES, "b", "c", ANY_LINES], ["a", "b", "b", "c", "x"])
    assert matches(["a", ANY_LINES], ["a"])
    assert not matches(["a", ANY_LINES, "d"], ["a", "b", "c"])
    assert not matches(["a", "d"], ["a", "b", "d"])


def printed_session(block: Block, printed: list[tuple[str, int]]) -> list[str]:
    """A session block's lines with what each command printed (and its exit status) where it shows some."""
    lines = []
    for command, (output, code) in zip(block.commands, printed, strict=True):
        lines.append(f"$ {command.text}")
        if command.shown:
            lines += [line.rstrip() for line in output.splitlines() if not PROFILER_LINE.match(line.encode())]
        if command.exit_code is not None and command.shown:
            lines.append(f"exit {code}")
    return lines


def _runs_here(block: Block) -> bool:
    return not block.marker or (block.marker[0] == "slow" and bool(os.environ.get("AITUNE_README_SLOW")))


def _print_real_outputs(write: bool) -> None:
    """Run the blocks the test runs in a fresh copy, print what each command printed, and with ``write`` paste it."""
    import tempfile

    rewritten: dict[Block, list[str]] = {}
    with tempfile.TemporaryDirectory() as folder:
        space = make_workspace(Path(folder))
        for block in filter(_runs_here, BLOCKS):
            print(f"=== {block.page}:{block.line} ({block.kind})", flush=True)
            if block.kind in ("python", "script"):
                print((run_python(block, space) if block.kind == "python" else run_script(block, space)).stdout)
            else:
                printed = []
                for command in block.commands:
                    result = run_shell(command.text, space)
                    printed.append((result.stdout.replace(f"{space}{os.sep}", ""), result.returncode))
                    print(f"$ {command.text}\n{printed[-1][0]}exit {result.returncode}", flush=True)
                if ANY_LINES not in (line.strip() for line in block.lines):
                    rewritten[block] = printed_session(block, printed)
    if write:
        for page in PAGES:
            name = str(page.relative_to(ROOT))
            lines = page.read_text(encoding="utf-8").splitlines()
            # From the end: earlier lines keep their place.
            for block in sorted((b for b in rewritten if b.page == name), key=lambda block: -block.line):
                lines[block.line : block.line + len(block.lines)] = rewritten[block]
            page.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    _print_real_outputs(write="--write" in sys.argv[1:])
