"""Running the real ``aitune-profile`` console script in a subprocess, as a user's shell or CI would, or its
Typer app in this process (`invoke_cli`) where the text and exit code are under test, not the process."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = Path(__file__).resolve().parent / "apps"


def cli_command() -> list[str]:
    """The installed console script next to this interpreter, else ``python -m aitune.cli``."""
    script = Path(sys.executable).parent / "aitune-profile"
    return [str(script)] if script.exists() else [sys.executable, "-m", "aitune.cli"]


def run_cli(*args: str, cwd: Path | None = None, check: bool = False, block_torch: bool = False):
    """Run ``aitune-profile args...``; the worktree's code first on the path, a wide terminal for tables."""
    # The caller's path stays after the worktree: it may hold dependencies installed into a folder of their
    # own, as scripts/gpu_check.sh does on the GPU image.
    path = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))
    env = {**os.environ, "PYTHONPATH": path, "COLUMNS": "160", "NO_COLOR": "1"}
    command = cli_command()
    if block_torch:  # as on a maintainer's machine without torch
        code = "import sys; sys.modules['torch'] = None; from aitune.cli import main; main()"
        command = [sys.executable, "-c", code]
    result = subprocess.run([*command, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)
    if check and result.returncode != 0:
        raise AssertionError(f"aitune-profile {' '.join(args)} exited {result.returncode}:\n{result.stderr}")
    return result


def invoke_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``aitune-profile args...`` run in this process by Typer's `CliRunner`: its exit code, stdout and stderr as
    `run_cli` gives them, without an interpreter (and torch) starting for each call."""
    from typer.testing import CliRunner

    from aitune.cli import app

    before = Path.cwd()
    os.chdir(cwd or before)  # contextlib.chdir is Python 3.11+
    try:
        result = CliRunner(env={"COLUMNS": "160", "NO_COLOR": "1"}).invoke(app, list(args), prog_name="aitune-profile")
    finally:
        os.chdir(before)
    return subprocess.CompletedProcess(["aitune-profile", *args], result.exit_code, result.stdout, result.stderr)


def capture_busy_app(out: Path, *flags: str) -> Path:
    """``aitune-profile capture`` of ``apps/busy_app.py:infer`` (1 warmup, 2 runs) with ``flags``
    into ``out``; the path of the profile it wrote."""
    result = run_cli(
        "capture",
        f"{APPS / 'busy_app.py'}:infer",
        "--input",
        "x",
        *flags,
        *("--runs", "2", "--warmup", "1", "--out", str(out), "--json"),
        check=True,
    )
    return Path(json.loads(result.stdout)["profiles"][0]["profile"])


def terminal_text(*renderables: object, width: int = 200) -> str:
    """What a terminal ``width`` columns wide shows for ``renderables`` (Rich tables, text), as plain text."""
    from rich.console import Console

    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    for renderable in renderables:
        console.print(renderable)
    return console.export_text()
