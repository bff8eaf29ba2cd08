"""The viewer in real headless Chromium: `panel serve viewer/` on a free port, driven by Playwright.

Needs Debian's chromium (`.ci/run` installs it); select with ``-m browser``, skip with ``-m "not browser"``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest
from documents import HOSTILE, pipeline_doc, with_warning
from ranks import merged
from viewer_server import ARTIFACTS, CHROMIUM, expecting, open_page, page_text, serve_viewer, warm_up

from aitune import compare
from aitune.compare.loop_report import read_loop_report
from aitune.report import dumps, load
from aitune.suggest import suggest
from aitune.viewer import overview, targets

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"needs Debian's chromium at {CHROMIUM}"),
]

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
TUNED = "tuned-pipeline"
BEFORE, AFTER = f"{TUNED}/before/profile.json", f"{TUNED}/after/profile.json"
HOSTILE_CORPUS = Path(__file__).resolve().parent / "hostile"
BROKEN_TRACE = "broken-trace.trace.json"
OPERATOR_KEY_PROFILE = "operator-key-html.profile.json"


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory) -> Path:
    """The samples plus a hostile pair whose region name and warning message are markup."""
    folder = tmp_path_factory.mktemp("runs")
    shutil.copytree(SAMPLES, folder, dirs_exist_ok=True)
    hostile = with_warning(pipeline_doc(65.0, extra_region=f"untuned_module:{HOSTILE}"), "HOSTILE", HOSTILE)
    (folder / "hostile.profile.json").write_bytes(dumps(hostile))
    (folder / "plain.profile.json").write_bytes(dumps(pipeline_doc(30.0)))
    (folder / "broken-trace.profile.json").write_bytes(dumps({**pipeline_doc(30.0), "trace_file": BROKEN_TRACE}))
    shutil.copy(HOSTILE_CORPUS / "string-ts.trace.json", folder / BROKEN_TRACE)
    shutil.copy(HOSTILE_CORPUS / OPERATOR_KEY_PROFILE, folder / OPERATOR_KEY_PROFILE)
    (folder / "merged.profile.json").write_bytes(dumps(merged([pipeline_doc(65.0), pipeline_doc(200.0)])))
    return folder


@pytest.fixture(scope="module")
def server(runs_dir, browser):
    with serve_viewer(runs_dir) as url:
        warm_up(browser, f"{url}?before={BEFORE}&after={AFTER}")
        yield url


def test_the_sample_pair_shows_compares_numbers_charts_and_operator_rows(server, browser):
    with open_page(browser, f"{server}?before={BEFORE}&after={AFTER}") as page:
        page.wait_for_selector("canvas")
        diff = compare.compare_profiles(load(SAMPLES / BEFORE), load(SAMPLES / AFTER), domain="cpu")

        # The overview fills in when the page's own compare finishes, after the charts: wait for it.
        expect = expecting()
        expect(page.locator(".overview-before")).to_have_text(overview.format_ms(diff.run_time.before_us))
        expect(page.locator(".overview-after")).to_have_text(overview.format_ms(diff.run_time.after_us))
        expect(page.locator(".overview-speedup")).to_have_text(overview.format_speedup(diff.run_time))
        page.locator(".bk-tab", has_text="Operators").click()
        page.wait_for_selector(".tabulator-row")
        page.locator(".bk-tab", has_text="Regions").click()
        page.wait_for_selector("canvas")
        page.screenshot(path=ARTIFACTS / "compare-page.png", full_page=True)


def test_the_tune_folders_pair_shows_its_gains_and_what_to_tune_next(server, browser):
    with open_page(browser, f"{server}?before={BEFORE}&after={AFTER}") as page:
        report = read_loop_report(orjson.loads((SAMPLES / TUNED / "compare.json").read_bytes()), "compare.json")
        found = suggest(load(SAMPLES / AFTER), domain="cpu")

        expect = expecting()
        expect(page.locator(".gain-table .tabulator-row")).to_have_count(len(report.regions))
        expect(page.locator(".tuned-speedup")).to_contain_text(report.end_to_end.shown())
        page.locator(".bk-tab", has_text="Suggestions").click()
        expect(page.locator(".suggest-picked")).to_have_text(targets.picked_line(found))
        assert page.locator(".target-table .tabulator-row").count() >= 1


def test_the_timeline_draws_one_run_and_offers_the_trace(server, browser):
    with open_page(browser, f"{server}?before={BEFORE}") as page:
        page.locator(".bk-tab", has_text="Timeline").click()
        page.wait_for_selector("text=Download trace.json.gz")

        assert page.locator("canvas").count() >= 1


def test_the_region_tree_lists_nested_regions_of_both_sides(server, browser):
    with open_page(browser, f"{server}?before={BEFORE}&after={AFTER}") as page:
        page.locator(".bk-tab", has_text="Region tree").click()
        page.wait_for_selector(".tree-table .tabulator-row")

        rows = page.locator(".tree-table .tabulator-row").all_inner_texts()
        assert any("unet.blocks.0" in row for row in rows)
        assert "before: run" in page_text(page) and "after: run" in page_text(page)
        page.screenshot(path=ARTIFACTS / "region-tree.png", full_page=True)


def test_a_merged_profile_shows_a_chart_per_rank_and_a_rank_picker(server, browser):
    with open_page(browser, f"{server}?before=merged.profile.json") as page:
        page.locator(".bk-tab", has_text="Ranks").click()
        expect = expecting()
        expect(page.locator(".rank-table .tabulator-row")).to_have_count(2)
        page.locator(".rank-pick select").select_option("rank 1")

        expect(page.locator(".rank-region-table .tabulator-row").first).to_be_visible()
        assert page.locator("canvas").count() >= 1
        assert "untuned_module:unet" in page_text(page)
        page.screenshot(path=ARTIFACTS / "ranks-tab.png", full_page=True)


def test_an_uploaded_file_replaces_the_shown_profile(server, browser, tmp_path):
    upload = tmp_path / "uploaded-after.profile.json"  # a name the shown profile's does not contain
    shutil.copy(SAMPLES / AFTER, upload)

    with open_page(browser, f"{server}?before={BEFORE}") as page:
        page.wait_for_selector("canvas")
        page.locator(".profile-upload input[type=file]").set_input_files(str(upload))

        page.wait_for_selector(f".aitune-names >> text={upload.name}")


def test_hostile_names_and_messages_are_shown_as_text_and_never_run(server, browser):
    with open_page(browser, f"{server}?before=hostile.profile.json&after=plain.profile.json") as page:
        page.wait_for_selector("canvas")
        page.locator(".bk-tab", has_text="Warnings").click()
        page.wait_for_selector(".tabulator-row")

        assert "<script>window.__pwned = 1</script>" in page_text(page)
        assert page.evaluate("window.__pwned") is None


_PLANTED = """() => {
  let found = 0;
  const walk = (root) => {
    for (const element of root.querySelectorAll("*")) {
      if (element.tagName === "IMG" || element.hasAttribute("onerror")) found += 1;
      if (element.shadowRoot) walk(element.shadowRoot);
    }
  };
  walk(document);
  return found;
}"""
"""How many ``img`` elements or ``onerror`` attributes the page holds, shadow roots too (the viewer writes none)."""


def test_an_operator_rows_extra_key_never_reaches_the_page_and_its_script_never_runs(server, browser):
    with open_page(browser, f"{server}?before={OPERATOR_KEY_PROFILE}") as page:
        page.wait_for_selector("canvas")
        title = page.title()
        page.locator(".bk-tab", has_text="Operators").click()
        expecting()(page.locator(".operator-table .tabulator-col-title", has_text="key").first).to_be_visible()

        assert page.locator(".operator-table", has_text="onerror").count() == 0
        assert page.evaluate(_PLANTED) == 0
        assert page.title() == title


def test_a_url_outside_the_runs_folder_is_refused_in_one_sentence(server, browser):
    with open_page(browser, f"{server}?before=../../etc/passwd") as page:
        expecting()(page.locator(".aitune-problem")).to_have_text(
            "'../../etc/passwd' is outside the runs folder; name a file listed in the runs folder."
        )


def test_a_50_mb_upload_is_refused_by_the_browser(server, browser, tmp_path):
    big = tmp_path / "big.profile.json"
    with open(big, "wb") as stream:
        stream.truncate(50 * 2**20)

    with open_page(browser, f"{server}?before={BEFORE}") as page:
        page.wait_for_selector("canvas")
        page.locator(".profile-upload input[type=file]").set_input_files(str(big))

        page.wait_for_selector("text=File is too large")


def test_a_deeply_nested_upload_is_refused_in_one_sentence(server, browser, tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"schema_version": 1, "runs": ' + "[" * 5000 + "]" * 5000 + "}")

    with open_page(browser, f"{server}?before={BEFORE}") as page:
        page.wait_for_selector("canvas")
        page.locator(".profile-upload input[type=file]").set_input_files(str(deep))

        expecting()(page.locator(".aitune-problem")).to_have_text(
            "deep.json: JSON nested deeper than 64 levels is refused; no profile or trace nests that deep."
        )


@pytest.mark.parametrize(
    ("query", "sentence"),
    [
        ("%00", "'\\x00' cannot be a file name (embedded null byte); pick a profile from the list."),
        ("a" * 5000, "'" + "a" * 38 + "… cannot be a file name (File name too long); pick a profile from the list."),
        ("%ff%fe.json", "'\ufffd\ufffd.json' is not a file in the runs folder; pick one from the list."),
    ],
    ids=["nul", "over-long", "not-utf-8"],
)
def test_a_url_value_no_file_can_have_is_one_sentence_on_a_working_page(server, browser, query, sentence):
    with open_page(browser, f"{server}?before={query}") as page:
        expecting()(page.locator(".aitune-problem")).to_have_text(sentence)

        assert page.locator(".profile-upload input[type=file]").count() == 1  # the page is built, not blank


def test_a_broken_trace_is_one_sentence_in_the_timeline_and_the_other_tabs_work(server, browser):
    with open_page(browser, f"{server}?before=broken-trace.profile.json") as page:
        page.wait_for_selector("canvas")
        page.locator(".bk-tab", has_text="Timeline").click()

        expect = expecting()
        expect(page.locator(".timeline-problem")).to_have_text(
            f"{BROKEN_TRACE}: traceEvents[10] is malformed ('ts' is str 'soon'); fix or drop it."
        )
        assert page.locator(".aitune-problem").count() == 1  # nothing above the tabs
        page.locator(".bk-tab", has_text="Operators").click()
        page.wait_for_selector(".operator-table .tabulator-row")
