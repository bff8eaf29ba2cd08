"""Where a run came from: the commit and branch of the git work tree it was recorded in, when there is one."""

from __future__ import annotations

import subprocess
from pathlib import Path

GIT_TIMEOUT_S = 5


def git_value(folder: Path, *args: str) -> str | None:
    """``git ARGS`` in ``folder``, stripped; None without git, outside a work tree, or on a detached HEAD's name."""
    try:
        done = subprocess.run(
            ["git", *args], cwd=folder, capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    value = done.stdout.strip()
    return value if done.returncode == 0 and value and value != "HEAD" else None


def commit_and_branch(folder: Path) -> tuple[str | None, str | None]:
    """The work tree's HEAD commit and current branch (None for each that git cannot tell)."""
    return git_value(folder, "rev-parse", "HEAD"), git_value(folder, "rev-parse", "--abbrev-ref", "HEAD")
