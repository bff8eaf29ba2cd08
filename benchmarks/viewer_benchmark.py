"""Viewer speed on two large profiles (500 regions × 10 runs each): server-side render and browser charts.

    PYTHONPATH=. .venv/bin/python benchmarks/viewer_benchmark.py

Targets (issue 7): the page builds server-side in under 1.5 s and the browser shows its charts
within 3 s. Prints the median of several tries, the machine and the versions.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import bokeh
import panel as pn

from aitune import compare
from aitune.markers import region_span_name, run_span_name
from aitune.report import build_profile, save
from aitune.viewer.app import build_page

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from viewer_server import CHROMIUM, open_page, serve_viewer  # the browser tests' server helper

REGIONS, RUNS, TRIES = 500, 10, 5


def large_profile(scale: float) -> dict:
    """A profile of ``REGIONS`` sibling regions over ``RUNS`` runs, built through the real trace → document path."""
    events = []
    for run in range(RUNS):
        start = run * 1e6
        cursor = start + 10.0
        for index in range(REGIONS):
            duration = scale * (5.0 + index % 37)
            events.append(_span(region_span_name(f"untuned_module:model.layers.{index}"), cursor, duration))
            events.append(_span("aten::linear", cursor + 0.5, duration - 1.0, "cpu_op"))
            cursor += duration + 1.0
        events.append(_span(run_span_name(run), start, cursor + 10.0 - start))
    return build_profile({"traceEvents": events, "aitune": {"config": {"measured_runs": RUNS}}})


def _span(name: str, start: float, duration: float, category: str = "user_annotation") -> dict:
    return {"ph": "X", "cat": category, "name": name, "ts": start, "dur": duration, "pid": 1, "tid": 1}


def server_render_seconds(runs_dir: Path, args: dict) -> tuple[float, float]:
    """Wall time to build the page and its Bokeh models: the first session (files read and validated),
    and the median of later sessions (files cached by the server process)."""
    times = []
    for _ in range(TRIES + 1):
        started = time.perf_counter()
        build_page(runs_dir, args).get_root()
        times.append(time.perf_counter() - started)
    return times[0], statistics.median(times[1:])


def browser_seconds(runs_dir: Path, query: str) -> tuple[float, float]:
    """Median wall times from navigation until the charts are drawn, and until compare's overview is shown."""
    from playwright.sync_api import sync_playwright

    charts, overview = [], []
    with serve_viewer(runs_dir) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=open_page.ARGS)
        for _ in range(TRIES):
            with open_page(browser, f"{url}?{query}") as page:
                started = time.perf_counter()
                page.reload()
                page.wait_for_selector("canvas")
                charts.append(time.perf_counter() - started)
                page.wait_for_selector(".overview-speedup", timeout=120_000)
                overview.append(time.perf_counter() - started)
        browser.close()
    return statistics.median(charts), statistics.median(overview)


def compare_seconds(before: dict, after: dict) -> float:
    """Wall time of one `aitune.compare.compare_profiles` call on the pair (what the overview waits for)."""
    started = time.perf_counter()
    compare.compare_profiles(before, after)
    return time.perf_counter() - started


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        runs_dir = Path(folder)
        before, after = large_profile(1.0), large_profile(0.7)
        save(before, runs_dir / "large-before.profile.json")
        save(after, runs_dir / "large-after.profile.json")
        args = {"before": [b"large-before.profile.json"], "after": [b"large-after.profile.json"]}
        first, server = server_render_seconds(runs_dir, args)
        diff = compare_seconds(before, after)
        charts, overview = browser_seconds(runs_dir, "before=large-before.profile.json&after=large-after.profile.json")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"panel {pn.__version__}, bokeh {bokeh.__version__}"
    )
    print(f"profiles: 2 × ({REGIONS} regions × {RUNS} runs), median of {TRIES}")
    print(f"server-side page build: first session {first:.2f} s, later sessions {server:.2f} s (target < 1.5 s)")
    print(f"browser, navigation to charts drawn: {charts:.2f} s (target < 3 s)")
    print(f"aitune.compare on the pair: {diff:.2f} s; browser, navigation to compare's overview: {overview:.2f} s")


if __name__ == "__main__":
    main()
