"""The viewer page without a server: where profiles come from, text shown as text, no torch needed."""

import html
import subprocess
import sys
from pathlib import Path

import pandas as pd
import panel as pn
from bokeh.models import HoverTool
from builders import decoder_trace
from documents import HOSTILE, pipeline_doc
from ranks import merged

from aitune.compare import Change
from aitune.report import build_profile
from aitune.report.model import as_profile
from aitune.report.safe_text import chart_text, html_name
from aitune.viewer import figures, overview, tables, views
from aitune.viewer.app import RUNS_DIR_ENV, build_page, default_pair, open_initial, query_value, runs_dir_from
from aitune.viewer.selection import Selection
from aitune.viewer.sources import Loaded
from aitune.viewer.store import ProfileStore

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


def test_the_runs_folder_comes_from_args_then_environment_then_default():
    default = Path("sample_traces")

    assert runs_dir_from(["--runs-dir", "mine"], {RUNS_DIR_ENV: "env"}, default) == Path("mine")
    assert runs_dir_from(["--show", "--runs-dir=mine"], {RUNS_DIR_ENV: "env"}, default) == Path("mine")
    assert runs_dir_from(["--runs-dir"], {RUNS_DIR_ENV: "env"}, default) == Path("env")  # a flag without its folder
    assert runs_dir_from([], {RUNS_DIR_ENV: "env"}, default) == Path("env")
    assert runs_dir_from([], {}, default) == default


def test_url_arguments_arrive_as_bytes_and_are_read_as_text():
    assert query_value({"before": [b"a.json"]}, "before") == "a.json"
    assert query_value({}, "after") is None


def test_without_a_url_a_before_after_pair_is_opened():
    assert default_pair(["x.json", "after-b.json", "before-a.json"]) == ("before-a.json", "after-b.json")
    assert default_pair(["x.json"]) == ("x.json", None)
    assert default_pair([]) == (None, None)


def test_without_a_url_a_tune_folders_own_pair_is_opened():
    names = ["a/after/profile.json", "a/before/profile.json", "b/after/profile.json", "b/before/profile.json"]

    assert default_pair(names) == ("a/before/profile.json", "a/after/profile.json")
    assert default_pair(["c/before/profile.json", "d/after/profile.json"]) == (
        "c/before/profile.json",
        "d/after/profile.json",
    )


def test_a_url_naming_a_file_outside_the_runs_folder_is_refused():
    store = ProfileStore(runs_dir=SAMPLES)

    open_initial(store, {"before": [b"../../etc/passwd"]})

    assert (store.before, store.after) == (None, None)
    assert store.problem == "'../../etc/passwd' is outside the runs folder; name a file listed in the runs folder."


def test_profile_text_is_escaped_before_it_reaches_html():
    pane = views.text_block(HOSTILE)

    assert pane.object == f'<div class="aitune-text">{html.escape(HOSTILE)}</div>'


def test_hostile_region_names_reach_the_chart_as_data_and_the_movers_as_text():
    doc = pipeline_doc(65.0, extra_region=f"untuned_module:{HOSTILE}")
    store = ProfileStore(before=Loaded("b.json", doc), after=Loaded("a.json", pipeline_doc(30.0)))

    plot = figures.region_bars(store.region_table("cpu"), "cpu")
    lines = overview.movers(store.compare_now("cpu"), limit=10)

    regions = ["text_encoder", "unet", "vae.decode"]
    assert list(plot.renderers[0].data_source.data["path"]) == [*regions, HOSTILE, "(residual)", *regions, "(residual)"]
    assert f"{HOSTILE} (removed): 0.003 ms → -" in lines


def test_top_movers_name_the_self_time_of_a_region_that_spans_the_run():
    before, after = build_profile(decoder_trace(model_us=50)), build_profile(decoder_trace(model_us=30))
    store = ProfileStore(before=Loaded("b.json", before), after=Loaded("a.json", after))

    lines = overview.movers(store.compare_now("cpu"), limit=10)

    assert sorted(line.split(" (both)")[0] for line in lines) == ["generate (self)", "lm_head", "model"]


def test_the_speedup_is_before_over_after_with_the_inverted_interval():
    assert overview.format_speedup(Change(100.0, 50.0, 0.5, 0.4, 0.625)) == "2.00× [1.60, 2.50]"
    assert overview.format_speedup(Change(100.0, None)) == "-"


PAIR_SHOWN = '<div class="aitune-names">tuned-pipeline/before/profile.json vs tuned-pipeline/after/profile.json</div>'
"""The overview's first line for the samples folder: the tune folder's own pair, opened without a URL."""


def test_the_page_builds_for_the_sample_pair():
    page = build_page(SAMPLES, {})
    page.get_root()  # every view renders

    assert PAIR_SHOWN in [str(pane.object) for pane in page.select(pn.pane.HTML)]


def test_the_viewer_imports_and_builds_without_torch():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from pathlib import Path\n"
        "import panel as pn\n"
        "from aitune.viewer.app import build_page\n"
        f"page = build_page(Path({str(SAMPLES)!r}), {{}})\n"
        "page.get_root()\n"
        "print(*(pane.object for pane in page.select(pn.pane.HTML)), sep='\\n')\n"
        "print(sys.modules['torch'])\n"
    )

    shown = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)

    assert PAIR_SHOWN in shown.stdout.splitlines()
    assert shown.stdout.splitlines()[-1] == "None"  # torch was never imported


def test_top_movers_are_topmost_regions_not_blocks_inside_a_module_tuned_whole():
    store = ProfileStore(runs_dir=SAMPLES)
    assert store.open_names("tuned-pipeline/before/profile.json", "tuned-pipeline/after/profile.json")

    lines = overview.movers(store.compare_now("cpu"), limit=10)

    assert [line.split(" (")[0] for line in lines] == ["unet", "vae", "text_encoder"]  # no unet.blocks.N


def test_the_operator_table_says_when_it_totals_runs_of_their_own():
    doc = pipeline_doc(65.0)
    doc["operator_runs"] = doc["runs"][:2]
    view = views.Operators(store=ProfileStore(before=Loaded("b.json", doc)), selection=Selection())

    note = view._render().objects[0].object

    assert "b.json: operators traced in 2 run(s) of their own, after the measured runs" in note


OPERATOR_KEY = "<img src=x onerror=\"document.title='X'\">"


def test_a_table_titles_every_column_through_the_escaping_door_and_shows_any_other_text_column_as_text():
    long_key = "x" * 200 + "_us"
    frame = pd.DataFrame(
        {"key": ["aten::mm"], OPERATOR_KEY: [OPERATOR_KEY], "lm\u200bhead": [[1, "<b>"]], long_key: [1.0]}
    )

    grid = views.table(frame, ["key"], "t", titles={"key": "<i>operator</i>"})

    assert grid.titles == {
        "key": "&lt;i&gt;operator&lt;/i&gt;",
        OPERATOR_KEY: "&lt;img src=x onerror=&quot;document.title=&#x27;X&#x27;&quot;&gt;",
        "lm\u200bhead": "lm\\u200bhead",
        long_key: html_name(long_key),  # cut, as a long name is in a cell
    }
    assert grid.formatters[OPERATOR_KEY] == grid.formatters["lm\u200bhead"] == views.PLAIN_TEXT
    assert grid.value[OPERATOR_KEY].tolist() == [OPERATOR_KEY]  # plaintext: Tabulator escapes the cell
    assert grid.value["lm\u200bhead"].tolist() == ["[1, '<b>']"]  # a list shown as its text


def test_names_from_a_document_reach_selects_spelled_out_and_chart_titles_never_as_mathematics():
    region = "untuned_module:$$\\href{https://evil.example}{ok}$$\u200b"
    doc = merged([pipeline_doc(65.0, extra_region=region), pipeline_doc(200.0, extra_region=region)])

    plot = figures.rank_bars(tables.rank_region_table(doc).assign(side="before"), region)
    options = views.labelled([region])

    assert "$$" not in plot.title.text and plot.title.text.startswith("untuned_module:\\x24\\x24\\href")
    assert options == {"untuned_module:$$\\href{https://evil.example}{ok}$$\\u200b": region}
    assert (
        chart_text("a \\(x\\) \\[y\\]") == "a \\x5c\\x28x\\x5c\\x29 \\x5c\\x5by\\x5c\\x5d"
    )  # Bokeh's other delimiters


def test_every_chart_tooltip_lists_fields_that_bokeh_escapes_never_an_html_template():
    doc = pipeline_doc(65.0, extra_region=f"untuned_module:{HOSTILE}")
    store = ProfileStore(before=Loaded("b.json", doc))
    ranks = tables.rank_region_table(merged([doc, doc])).assign(side="before")

    plots = [
        figures.region_bars(store.region_table("cpu"), "cpu"),
        figures.run_points(store.run_table(), "wall"),
        figures.rank_bars(ranks, ranks["region_id"].iloc[0]),
        figures.timeline_bars(pd.DataFrame(columns=tables.TIMELINE_COLUMNS), "t"),
        figures.roofline(pd.DataFrame(columns=[*tables.EFFICIENCY_COLUMNS, "side"]), {}),
    ]

    tooltips = [tool.tooltips for plot in plots for tool in plot.tools if isinstance(tool, HoverTool)]
    assert len(tooltips) == len(plots) and all(isinstance(fields, list) for fields in tooltips)
    assert not any("{safe}" in value for fields in tooltips for _, value in fields)


def test_two_runs_clicked_on_the_history_trend_open_as_a_pair_the_older_as_before(tmp_path):
    from aitune.history.database import open_store
    from aitune.history.record import record_of
    from aitune.viewer.trends import PICK_TWO, HistoryTrends

    with open_store(tmp_path / "history.db") as history:
        documents = [pipeline_doc(100.0), pipeline_doc(130.0)]
        ids = [history.add(record_of(doc, commit=f"c{index}"), doc) for index, doc in enumerate(documents)]
    opened = []
    trends = HistoryTrends(store=ProfileStore(runs_dir=tmp_path), history="history.db", opened=lambda: opened.append(1))

    first = trends._pick(ids[1])
    second = trends._pick(ids[0])

    assert first == f"Run {ids[1]} picked: click a second point to open the two as a pair."
    assert second == PICK_TWO and opened == [1]
    names = (trends.store.before.name, trends.store.after.name)
    assert names == (f"history.db run {ids[0]}", f"history.db run {ids[1]}")
    assert trends.store.after.doc.runs == as_profile(pipeline_doc(130.0)).runs


def test_each_trend_point_carries_its_stored_run_for_a_click_to_open():
    from aitune.history.record import RUN_TIME
    from aitune.history.store import TrendPoint
    from aitune.viewer.trends import trend_frame

    points = [TrendPoint(run, "2026-01-02T10:00:00", "abc", {RUN_TIME: 900.0 + run, "vae": 300.0}) for run in (7, 9)]

    plot = figures.trend_lines(trend_frame(points))

    clicked = plot.select_one({"name": figures.TREND_POINTS}).data_source.data
    assert list(clicked[figures.TREND_RUN]) == [7, 9, 7, 9]  # the run time's points, then vae's
    assert list(clicked["ms"]) == [0.907, 0.909, 0.3, 0.3]
