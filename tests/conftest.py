"""Shared fixtures: the bundled example app, and guards that nothing stays registered or patched between tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))
sys.path.insert(0, str(Path(__file__).resolve().parent / "apps"))  # the test workloads, importable by name


@pytest.fixture(autouse=True)
def registry_is_left_empty():
    """Every test leaves the process-wide module registry as it found it."""
    from aitune.torch.registry import MODULE_REGISTRY

    before = {entry.region for entry in MODULE_REGISTRY}
    yield
    after = {entry.region for entry in MODULE_REGISTRY}
    assert after == before, f"test left modules registered: {sorted(after - before)}"


@pytest.fixture(autouse=True)
def jit_is_left_off():
    """JIT tuning's process-wide state (session, mode, ``nn.Module.__init__`` patch) is clean after every test."""
    import aitune.torch.jit as jit

    assert jit.is_clean(), "JIT tuning was already in use when the test started"
    yield
    assert jit.is_clean(), "test left JIT tuning in use; call aitune.torch.jit.reset() in its teardown"


# --- the command line: real console-script runs shared by the tests/test_cli_*.py files ---

from cli_helpers import APPS, run_cli  # noqa: E402


@pytest.fixture(scope="session")
def entry_capture(tmp_path_factory):
    """`capture examples/pipeline_app.py:infer` (entry mode) once for the session: its folder and result."""
    out = tmp_path_factory.mktemp("entry") / "out"
    result = run_cli(
        "capture",
        str(EXAMPLES / "pipeline_app.py") + ":infer",
        "--input",
        "input_data",
        "--warmup",
        "0",
        "--runs",
        "2",
        "--out",
        str(out),
    )
    return out, result


@pytest.fixture(scope="session")
def script_capture(tmp_path_factory):
    """`capture examples/pipeline_app.py` (script mode) once for the session: its folder and result."""
    out = tmp_path_factory.mktemp("script") / "out"
    return out, run_cli("capture", str(EXAMPLES / "pipeline_app.py"), "--out", str(out))


@pytest.fixture(scope="session")
def busy_captures(tmp_path_factory):
    """Three entry captures of tests/apps/busy_app.py: two of `infer`, one of the 30% slower `infer_slower`."""
    folder = tmp_path_factory.mktemp("busy")
    paths = {}
    for name, function in (("first", "infer"), ("second", "infer"), ("slower", "infer_slower")):
        out = folder / name
        run_cli(
            "capture",
            f"{APPS / 'busy_app.py'}:{function}",
            "--input",
            "x",
            "--warmup",
            "1",
            "--runs",
            "7",
            "--no-trace",
            "--out",
            str(out),
            check=True,
        )
        paths[name] = out / "profile.json"
    return paths
