"""The HTML report in real headless Chromium, opened from a file URL with the network off.

Each page must draw its charts, log no console error (a blocked script or load would log one) and ask
for nothing but its own file; a hostile name must show as text and never run. Needs Debian's chromium
(`.ci/run` installs it); select with ``-m browser``, skip with ``-m "not browser"``.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from documents import HOSTILE, pipeline_doc, with_warning
from viewer_server import CHROMIUM, page_text

from aitune import compare
from aitune.cli.pages import pair_page, profile_page
from aitune.compare.gains import speedup_line
from aitune.compare.loop_report import read_tune_folder
from aitune.report import load

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"needs Debian's chromium at {CHROMIUM}"),
]

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
TUNED = SAMPLES / "tuned-pipeline"
NAMED = sorted((ROOT / "tests" / "hostile").glob("name-*.profile.json"))


@contextlib.contextmanager
def opened(browser, path: Path):
    """``path`` in an offline page; on leaving, asserts no console error, no page error, no request but the file."""
    context = browser.new_context(offline=True, java_script_enabled=True)
    page = context.new_page()
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("request", lambda request: requests.append(request.url))
    page.goto(path.as_uri())
    try:
        yield page
        assert errors == []
        assert requests == [path.as_uri()]
    finally:
        context.close()


def written(tmp_path: Path, name: str, page: str) -> Path:
    path = tmp_path / name
    path.write_text(page)
    return path


def test_a_profile_page_draws_its_charts_and_tree_offline(browser, tmp_path):
    path = written(tmp_path, "profile.html", profile_page(load(TUNED / "before" / "profile.json")))

    with opened(browser, path) as page:
        assert page.locator("svg.chart").count() >= 3
        assert page.locator("svg.chart rect.bar").count() >= 4
        assert page.locator("svg.chart").first.bounding_box()["height"] > 50  # laid out, not collapsed
        page.locator("summary", has_text="untuned_module:unet.blocks.0").first.wait_for(state="visible")


def test_a_pair_page_shows_the_speedup_with_its_interval(browser, tmp_path):
    before, after = load(TUNED / "before" / "profile.json"), load(TUNED / "after" / "profile.json")
    diff = compare.compare_profiles(before, after)
    path = written(tmp_path, "pair.html", pair_page(before, after, diff))

    with opened(browser, path) as page:
        assert page.locator(".speedup .big").inner_text() == speedup_line(diff.run_time)
        assert page.locator("svg.chart circle.dot").count() >= 3  # each ratio with its interval
        assert page.locator("svg.chart line.whisker").count() >= 3


def test_a_tune_folder_page_shows_its_tuned_regions(browser, tmp_path):
    folder = read_tune_folder(TUNED)
    diff = compare.compare_profiles(folder.before, folder.after, domain=folder.report.domain)
    path = written(tmp_path, "tune.html", pair_page(folder.before, folder.after, diff, folder.report))

    with opened(browser, path) as page:
        assert page.locator(".tuned tbody tr").count() == len(folder.report.regions)


@pytest.mark.parametrize("profile", NAMED, ids=lambda path: path.stem)
def test_a_hostile_name_from_the_corpus_is_shown_as_text(browser, tmp_path, profile):
    path = written(tmp_path, "hostile.html", profile_page(load(profile)))

    with opened(browser, path) as page:
        assert page.locator("svg.chart").count() >= 1
        assert "HOSTILE" in page_text(page)


def test_a_script_in_a_name_and_a_message_never_runs(browser, tmp_path):
    hostile = with_warning(pipeline_doc(65.0, extra_region=f"untuned_module:{HOSTILE}"), "HOSTILE", HOSTILE)
    plain = pipeline_doc(30.0)
    pages = {
        "one.html": profile_page(hostile),
        "pair.html": pair_page(hostile, plain, compare.compare_profiles(hostile, plain)),
    }

    for name, html in pages.items():
        with opened(browser, written(tmp_path, name, html)) as page:
            assert "<script>window.__pwned = 1</script>" in page_text(page)
            assert page.evaluate("window.__pwned") is None
            assert page.locator("img").count() == 0
