"""Run `panel serve viewer/` on a free local port and open pages in Chromium that fail on any error.

A page fails its test when it shows a traceback, logs a console error, or asks any host but the
viewer for a resource (the viewer must work offline).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
STARTUP_SECONDS = 120
# The suite runs two test files at once on two cores: beside an Inductor build or the all-cores-busy test
# a page's first draw has taken over 20 s, so a page waits a minute before it fails.
PAGE_TIMEOUT_MS = 60_000


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def serve_viewer(runs_dir: Path) -> Iterator[str]:
    """Serve the viewer on 127.0.0.1 for the duration of the block; yields the page URL; always stops it."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "panel",
        "serve",
        "viewer/",
        "--address",
        "127.0.0.1",
        "--port",
        str(port),
        "--allow-websocket-origin",
        f"127.0.0.1:{port}",
        "--args",
        "--runs-dir",
        str(runs_dir),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/viewer"
    try:
        _wait_until_up(url, process, port)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_until_up(url: str, process: subprocess.Popen, port: int) -> None:
    """Wait for the port to accept, then for one page: a page build takes seconds on a loaded machine,
    so short probes of the page itself would time out one after another."""
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"panel serve exited early:\n{process.stdout.read().decode(errors='replace')}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            break
        time.sleep(0.2)
    with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=max(1.0, deadline - time.monotonic())):
        return
    raise RuntimeError(f"panel serve did not answer at {url} within {STARTUP_SECONDS} s")


def warm_up(browser, url: str) -> None:
    """Open ``url`` once and wait for its first chart: the first page of a server loads and compiles
    its scripts, which a test should not pay inside its own wait."""
    page = browser.new_page()
    try:
        page.goto(url, timeout=STARTUP_SECONDS * 1000)
        page.wait_for_selector("canvas", timeout=STARTUP_SECONDS * 1000)
    finally:
        page.close()


@contextlib.contextmanager
def open_page(browser, url: str):
    """A page at ``url``; on leaving, asserts no traceback text, no console error and no outside request."""
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    errors: list[str] = []
    outside: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("request", lambda request: None if _is_local(request.url) else outside.append(request.url))
    page.goto(url)
    try:
        yield page
        assert "Traceback" not in page_text(page)
        assert errors == [], (errors, outside)
        assert outside == [], outside
    finally:
        page.close()


def expecting():
    """Playwright's ``expect``, waiting as long as a page may take (`PAGE_TIMEOUT_MS`)."""
    from playwright.sync_api import expect

    expect.set_options(timeout=PAGE_TIMEOUT_MS)
    return expect


def page_text(page) -> str:
    """All text on the page, shadow roots included (Bokeh renders every component in one)."""
    return page.evaluate(_TEXT_WALK)


_TEXT_WALK = """() => {
  const parts = [];
  const walk = (node) => {
    if (node.shadowRoot) walk(node.shadowRoot);
    for (const child of node.childNodes) child.nodeType === 3 ? parts.push(child.textContent) : walk(child);
  };
  walk(document.body);
  return parts.join(" ");
}"""


def _is_local(url: str) -> bool:
    return url.startswith(("http://127.0.0.1", "ws://127.0.0.1", "data:", "blob:", "about:"))


open_page.ARGS = [  # type: ignore[attr-defined]
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
