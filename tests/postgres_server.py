"""A throwaway PostgreSQL server for the history's tests: initdb into a temporary folder, served on a unix
socket there (no TCP port, so parallel workers never collide), stopped and removed at the session's end.

Debian's ``postgresql`` package provides the binaries (``.ci/run`` installs it). Without them the
tests that need a server skip, unless ``AITUNE_REQUIRE_POSTGRES=1`` (set by ``.ci/run``), where they fail.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

REQUIRED = os.environ.get("AITUNE_REQUIRE_POSTGRES") == "1"
PORT = 5432  # names the socket file inside the private folder; nothing listens on TCP


def server_binary(name: str) -> str | None:
    """``initdb`` or ``pg_ctl``: on the PATH, else in Debian's versioned folder (newest first)."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    return candidates[0] if candidates else None


def _as_server_user() -> list[str]:
    """The server refuses to run as root: under root, run it as ``postgres``."""
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URL of a running server's ``postgres`` database (user ``postgres``, trust authentication)."""
    initdb, pg_ctl = server_binary("initdb"), server_binary("pg_ctl")
    if initdb is None or pg_ctl is None:
        message = "PostgreSQL's server binaries are not installed (apt-get install -y postgresql)"
        if REQUIRED:
            pytest.fail(f"{message}, and AITUNE_REQUIRE_POSTGRES=1 asks for them")
        pytest.skip(message)
    folder = Path(tempfile.mkdtemp(prefix="aitune-pg-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    data, log = folder / "data", folder / "server.log"
    run = _as_server_user()
    subprocess.run(
        [*run, initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "-N"], check=True, capture_output=True
    )
    options = f"-k {folder} -p {PORT} -c listen_addresses='' -F"
    subprocess.run(
        [*run, pg_ctl, "-D", str(data), "-o", options, "-l", str(log), "-w", "start"], check=True, capture_output=True
    )
    try:
        yield f"postgresql://postgres@/postgres?host={folder}&port={PORT}"
    finally:
        subprocess.run([*run, pg_ctl, "-D", str(data), "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: str) -> str:
    """A fresh, empty database on the session's server, for one test."""
    import psycopg

    name = f"history_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')  # a name made here, never from input
    return postgres_server.replace("/postgres?", f"/{name}?", 1)
