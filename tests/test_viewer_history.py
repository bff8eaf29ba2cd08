"""The viewer's History tab in real headless Chromium: a SQLite history filled by `aitune-profile history add` with
the bundled tune folder's real captures, its trend drawn from the stored runs, and two points picked on the chart
opening those runs as the pair every other tab shows.

Needs Debian's chromium (`.ci/run` installs it); select with ``-m browser``, skip with ``-m "not browser"``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_helpers import invoke_cli
from documents import HOSTILE
from viewer_server import CHROMIUM, expecting, open_page, page_text, serve_viewer, warm_up

from aitune import compare
from aitune.history.database import open_store
from aitune.report import load
from aitune.viewer import overview
from aitune.viewer.trends import TREND_RUNS, trend_frame

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"needs Debian's chromium at {CHROMIUM}"),
]

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces" / "tuned-pipeline"
BEFORE, AFTER = SAMPLES / "before" / "profile.json", SAMPLES / "after" / "profile.json"
HISTORY = "history.db"
COMMITS = [(BEFORE, "1a2b3c4d5e6f"), (AFTER, "77aa88bb99cc"), (BEFORE, HOSTILE)]
"""Three stored runs of one workload: before, after, and before again under a commit that is markup."""


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("runs")
    for profile, commit in COMMITS:
        added = invoke_cli("history", "add", str(profile), "--commit", commit, "--db", str(folder / HISTORY))
        assert added.returncode == 0, added.stderr
    (folder / "not-a-history.db").write_text("not a database\n" * 50)
    shutil.copy(BEFORE, folder / "plain.profile.json")
    return folder


@pytest.fixture(scope="module")
def server(runs_dir, browser):
    with serve_viewer(runs_dir) as url:
        warm_up(browser, f"{url}?before=plain.profile.json")
        yield url


_TREND_POINTS = """() => {
  for (const doc of window.Bokeh.documents) {
    const renderer = doc.get_model_by_name("trend-points");
    if (renderer) {
      const data = renderer.data_source.data;
      return Array.from(data.run, (run, i) => [run, data.row[i], data.ms[i]]);
    }
  }
  return null;
}"""
"""The drawn points as [run id, row, ms], read from the chart's own data source in the page."""


def _stored_points(runs_dir: Path) -> list[list]:
    with open_store(runs_dir / HISTORY) as history:
        (workload,) = history.workloads()
        points = history.trend(workload.workload, workload.machine, TREND_RUNS)
    return [[run, row, ms] for run, row, ms in trend_frame(points)[["run_id", "path", "ms"]].itertuples(index=False)]


def _wait_for_points(page) -> list[list]:
    page.wait_for_selector(".history-trends canvas")
    page.wait_for_function(f"({_TREND_POINTS})() !== null")
    return page.evaluate(_TREND_POINTS)


def test_the_trend_draws_run_time_and_the_largest_regions_of_every_stored_run(server, browser, runs_dir):
    with open_page(browser, f"{server}?history={HISTORY}") as page:
        drawn = _wait_for_points(page)

        stored = _stored_points(runs_dir)
        assert [(run, row) for run, row, _ in drawn] == [(run, row) for run, row, _ in stored]
        assert [ms for *_, ms in drawn] == pytest.approx([ms for *_, ms in stored])
        assert {row for _, row, _ in drawn} >= {"(run time)", "unet", "text_encoder"}
        assert {run for run, _, _ in drawn} == {1, 2, 3}
        assert page.evaluate("window.__pwned") is None  # the commit that is markup stayed text


def test_two_runs_picked_open_as_the_pair(server, browser):
    with open_page(browser, f"{server}?history={HISTORY}") as page:
        _wait_for_points(page)
        page.locator(".history-before select").select_option(label=_label_of(page, "run 2"))
        page.locator(".history-after select").select_option(label=_label_of(page, "run 3"))
        page.locator(".history-open button").click()

        expect = expecting()
        expect(page.locator(".aitune-names")).to_have_text(f"{HISTORY} run 2 vs {HISTORY} run 3")
        diff = compare.compare_profiles(load(AFTER), load(BEFORE), domain="cpu")  # run 2 is after's, 3 before's
        expect(page.locator(".overview-before")).to_have_text(overview.format_ms(diff.run_time.before_us))
        expect(page.locator(".overview-after")).to_have_text(overview.format_ms(diff.run_time.after_us))
        expect(page.locator(".bk-tab.bk-active")).to_have_text("Regions")


def test_a_file_that_is_not_a_history_is_one_sentence(server, browser):
    with open_page(browser, f"{server}?history=not-a-history.db") as page:
        expecting()(page.locator(".history-problem")).to_contain_text("not-a-history.db: the database refused")
        assert "Traceback" not in page_text(page)


def test_a_history_outside_the_runs_folder_is_refused(server, browser):
    with open_page(browser, f"{server}?history=../{HISTORY}") as page:
        expecting()(page.locator(".history-problem")).to_have_text(
            f"'../{HISTORY}' is outside the runs folder; name a file listed in the runs folder."
        )


def _label_of(page, prefix: str) -> str:
    options = page.locator(".history-before select option").all_inner_texts()
    return next(option for option in options if option.startswith(prefix))
