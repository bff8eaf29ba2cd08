"""One definition each: a region's share and a speedup read the same in the terminal, Markdown, viewer and suggest."""

from cli_helpers import terminal_text
from documents import pipeline_doc, profile

from aitune import compare
from aitune.cli.render import diff_view, profile_summary
from aitune.compare.gains import speedup_line
from aitune.report import render_markdown
from aitune.suggest import suggest
from aitune.viewer import overview
from aitune.viewer.sources import Loaded
from aitune.viewer.store import ProfileStore


def uneven_doc():
    """unet takes 60 of 100 µs, 10 of 50, 90 of 200: the median of its shares (0.6, 0.2, 0.45) is 45%,
    its median time over the median run (60 ÷ 100 µs) 60%."""
    unet = [{"untuned_module:unet": us} for us in (60.0, 10.0, 90.0)]
    return profile(unet, residual_us=[40.0, 40.0, 110.0], operator="aten::conv2d")


def test_a_region_has_one_share_in_every_reader():
    doc = uneven_doc()

    terminal = terminal_text(profile_summary(doc))
    markdown = render_markdown(doc)
    viewer = ProfileStore(before=Loaded("one.json", doc)).region_table("cpu")
    suggested = {target.path: target.share for target in suggest(doc).targets}

    assert "45.0%" in terminal.split("untuned_module:unet")[1].splitlines()[0]
    assert "| untuned_module:unet | 45.0% |" in markdown
    assert viewer.set_index("path").loc["unet", "fraction"] == 0.45
    assert suggested["unet"] == 0.45


def test_the_cli_and_the_viewer_word_a_speedup_the_same_way():
    diff = compare.compare_profiles(pipeline_doc(65.0), pipeline_doc(30.0))

    cli = speedup_line(diff.run_time)
    viewer = overview.format_speedup(diff.run_time)

    assert cli.startswith(f"speedup {viewer} ")
    assert float(viewer.split("×")[0]) > 1  # the after side is faster: a speedup above 1, before ÷ after


def test_compare_shows_in_its_table_the_speedup_the_viewer_shows():
    diff = compare.compare_profiles(pipeline_doc(65.0), pipeline_doc(30.0))

    table = terminal_text(diff_view(diff))
    run_time_row = next(line for line in table.splitlines() if "run time" in line)

    assert overview.format_speedup(diff.run_time) in run_time_row  # before ÷ after in both, one interval style
    assert "Speedup [95% CI]" in table and "Ratio" not in table
