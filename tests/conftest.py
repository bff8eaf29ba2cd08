"""Shared fixtures: the bundled example app, and guards that nothing stays registered or patched between tests.

The suite also runs where torch is not installed (``scripts/test_without_torch.sh``): nothing here
imports torch, the tuning folders are left out, a test module that imports torch is skipped as a
whole, and a test of a torch-free
module that needs torch all the same (a capture in a subprocess) is marked ``torch``.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

if "PYTEST_XDIST_WORKER" in os.environ:
    # One core per pytest-xdist worker (scripts/test.sh runs as many workers as the CI machine has cores):
    # torch's OpenMP team of a thread per core in every worker would oversubscribe the machine, and a team
    # waiting for a preempted thread stretches a run manyfold. Set before anything imports torch; the
    # captures' and examples' subprocesses inherit it. Tests of thread counts set them explicitly.
    os.environ.setdefault("OMP_NUM_THREADS", "1")

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))
sys.path.insert(0, str(Path(__file__).resolve().parent / "apps"))  # the test workloads, importable by name
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))  # the zoo's tiny configs

from postgres_server import postgres_server, postgres_url  # noqa: E402, F401  (fixtures of the history's tests)

TORCH_INSTALLED = importlib.util.find_spec("torch") is not None
NO_TORCH = "needs torch, which is not installed"
collect_ignore = [] if TORCH_INSTALLED else ["jit", "tuning"]  # every test there tunes a torch module
collect_ignore.append("apps/tp_tune.py")  # a torchrun rank: importing it joins the process group


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    """Without torch, a test module that fails to import because it imports torch is skipped, not an error.

    Only that exact failure: any other import error, or a missing module other than torch, still fails.
    """
    report = yield
    error = getattr(report, "call", None) and report.call.excinfo  # type: ignore[attr-defined]
    if not TORCH_INSTALLED and report.failed and error is not None and _missing_torch(error.value):
        report.outcome, report.longrepr = "skipped", (str(collector.path), 0, f"Skipped: {NO_TORCH}")
    return report


def _missing_torch(error: BaseException) -> bool:
    cause = getattr(error, "__cause__", None) or error  # pytest wraps a failed import in its own error
    return isinstance(cause, ModuleNotFoundError) and (cause.name or "").split(".")[0] == "torch"


def pytest_collection_modifyitems(items):
    """Without torch, the tests marked ``torch`` skip."""
    if not TORCH_INSTALLED:
        for item in items:
            if item.get_closest_marker("torch"):
                item.add_marker(pytest.mark.skip(reason=NO_TORCH))


@pytest.fixture(autouse=True)
def registry_is_left_empty():
    """Every test leaves the process-wide module registry as it found it."""
    before = _registered()
    yield
    after = _registered()
    assert after == before, f"test left modules registered: {sorted(after - before)}"


def _registered() -> set[str]:
    # Read only once something imported the registry: until then nothing can be registered, and a
    # torch-free test must not import torch through it.
    registry = sys.modules.get("aitune.torch.registry")
    return {entry.region for entry in registry.MODULE_REGISTRY} if registry else set()


@pytest.fixture(autouse=True)
def jit_is_left_off():
    """JIT tuning's process-wide state (session, mode, ``nn.Module.__init__`` patch) is clean after every test."""
    assert _jit_is_clean(), "JIT tuning was already in use when the test started"
    yield
    assert _jit_is_clean(), "test left JIT tuning in use; call aitune.torch.jit.reset() in its teardown"


def _jit_is_clean() -> bool:
    jit = sys.modules.get("aitune.torch.jit")  # not imported yet: nothing can be in use
    return jit is None or jit.is_clean()


# --- the command line: real console-script runs shared by the tests/test_cli_*.py files ---

from cli_helpers import APPS, run_cli  # noqa: E402


def made_once(tmp_path_factory, name: str, make: Callable[[Path], Any]) -> Any:
    """``make(folder)``'s JSON result, ``make`` run once for the whole test run.

    Without pytest-xdist that is once for the session, in a new folder. Under it, every worker would run
    a session fixture of its own: here the first worker to ask makes the files in a folder of the run
    that all workers share, while the others wait on a lock, then read its result and files (read-only).
    A worker that failed or was killed half-way leaves no result, and the next one makes them afresh.
    """
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return make(tmp_path_factory.mktemp(name))
    root = tmp_path_factory.getbasetemp().parent  # the run's folder, above each worker's own (gw0, gw1)
    folder, result = root / name, root / f"{name}.json"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not result.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            result.write_text(json.dumps(make(folder)))
        return json.loads(result.read_text())


def _capture_once(tmp_path_factory, name: str, *args: str) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """``aitune-profile capture args...`` into ``FOLDER/out``, once for the run: that folder and the result."""
    pytest.importorskip("torch")  # the capture runs in a subprocess, but needs torch all the same

    def capture(folder: Path) -> dict[str, Any]:
        done = run_cli("capture", *args, "--out", str(folder / "out"))
        return {"out": str(folder / "out"), "returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr}

    made = made_once(tmp_path_factory, name, capture)
    return Path(made.pop("out")), subprocess.CompletedProcess(["aitune-profile", "capture", *args], **made)


@pytest.fixture(scope="session")
def entry_capture(tmp_path_factory):
    """`capture examples/pipeline_app.py:infer` (entry mode) once for the run: its folder and result."""
    entry = str(EXAMPLES / "pipeline_app.py") + ":infer"
    return _capture_once(tmp_path_factory, "entry", entry, "--input", "input_data", "--warmup", "0", "--runs", "2")


@pytest.fixture(scope="session")
def script_capture(tmp_path_factory):
    """`capture examples/pipeline_app.py` (script mode) once for the run: its folder and result."""
    return _capture_once(tmp_path_factory, "script", str(EXAMPLES / "pipeline_app.py"))


@pytest.fixture(scope="session")
def busy_captures(tmp_path_factory):
    """Two entry captures of tests/apps/busy_app.py: one of `infer`, one of the 30% slower `infer_slower`."""
    pytest.importorskip("torch")  # the capture runs in a subprocess, but needs torch all the same

    def capture(folder: Path) -> dict[str, str]:
        paths = {}
        for name, function in (("first", "infer"), ("slower", "infer_slower")):
            out = folder / name
            target = f"{APPS / 'busy_app.py'}:{function}"
            flags = ("--input", "x", "--warmup", "1", "--runs", "7", "--no-trace")
            run_cli("capture", target, *flags, "--out", str(out), check=True)
            paths[name] = str(out / "profile.json")
        return paths

    return {name: Path(path) for name, path in made_once(tmp_path_factory, "busy", capture).items()}


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium, headless, shared by the tests of one module (the viewer's and the HTML report's)."""
    import viewer_server
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=viewer_server.CHROMIUM, args=viewer_server.open_page.ARGS)
        yield chromium
        chromium.close()
