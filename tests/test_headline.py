"""The headline: where a run's time splits, when one region (``generate``) spans the whole run. No torch."""

import pytest
from builders import GENERATE, HEAD, MODEL, decoder_trace, region, run, trace
from cli_helpers import terminal_text

from aitune.cli.render import profile_summary
from aitune.compare import compare_profiles
from aitune.report import build_profile, headline_rows, render_markdown, validate
from aitune.viewer import tables


def by_label(rows, run_index=0):
    return {row.label: row.times_us[run_index] for row in rows}


def test_runs_list_the_regions_inside_the_one_that_spans_the_run_and_the_tree_keeps_it():
    doc = build_profile(decoder_trace())

    assert doc["spanning_regions"] == [GENERATE]
    for run_doc in doc["runs"]:
        assert [share["region_id"] for share in run_doc["regions"]] == [MODEL, HEAD]
        assert run_doc["residual"]["cpu_time_us"] == pytest.approx(100 - 50 - 15)  # generate's self time included
        assert [node["region_id"] for node in run_doc["tree"]] == [GENERATE]
        assert [node["region_id"] for node in run_doc["tree"][0]["children"]] == [MODEL, HEAD]
    assert [entry["region_id"] for entry in doc["statistics"]["regions"]] == [MODEL, HEAD]
    assert validate(doc) == []


def test_the_residual_causes_explain_the_spanning_regions_self_time_too():
    doc = build_profile(decoder_trace())

    causes = doc["runs"][0]["residual"]["causes"]
    assert causes["tensor_ops"]["cpu_time_us"] == pytest.approx(5)  # the sampling op inside generate
    assert sum(cause["cpu_time_us"] for cause in causes.values()) == pytest.approx(35)


def test_the_headline_names_the_spanning_regions_self_time_and_the_residual_is_what_lies_outside():
    doc = build_profile(decoder_trace())

    rows = headline_rows(doc, "cpu")

    assert [(row.label, row.path, row.role) for row in rows] == [
        (MODEL, "model", "region"),
        (HEAD, "lm_head", "region"),
        (GENERATE + " (self)", "generate (self)", "self"),
        ("(residual)", "(residual)", "residual"),
    ]
    assert by_label(rows) == pytest.approx({MODEL: 50, HEAD: 15, GENERATE + " (self)": 33, "(residual)": 2})
    for index in range(len(doc["runs"])):
        assert sum(row.fractions[index] for row in rows) == pytest.approx(1)


def test_a_region_with_a_sibling_does_not_span_the_run_but_the_headline_looks_through_it():
    doc = build_profile(
        trace(
            run(0, 0, 100),
            region("untuned_module:unet", 1, 96),
            region("untuned_module:unet.block", 2, 90),
            region("untuned_module:vae.decode", 96, 99),
        )
    )

    assert "spanning_regions" not in doc
    assert [row.path for row in headline_rows(doc)] == ["unet.block", "unet (self)", "vae.decode", "(residual)"]


def test_a_lone_region_below_nine_tenths_of_the_run_is_the_headline_itself():
    doc = build_profile(decoder_trace(runs=1))
    lone = build_profile(trace(run(0, 0, 100), region(GENERATE, 10, 89), region(MODEL, 20, 60)))

    assert doc["spanning_regions"] == [GENERATE]  # 98% of the run
    assert "spanning_regions" not in lone  # 79%
    assert [row.label for row in headline_rows(lone)] == [GENERATE, "(residual)"]


def test_a_lone_region_with_nothing_inside_it_is_the_headline_itself():
    doc = build_profile(trace(run(0, 0, 100), region(MODEL, 1, 99)))

    assert "spanning_regions" not in doc
    assert [row.label for row in headline_rows(doc)] == [MODEL, "(residual)"]


def test_regions_that_span_the_run_one_inside_the_other_are_all_looked_through():
    doc = build_profile(
        trace(
            run(0, 0, 100),
            region("untuned_module:pipe", 0, 100),
            region("untuned_module:pipe.model", 2, 98),
            region("untuned_module:pipe.model.a", 10, 40),
            region("untuned_module:pipe.model.b", 40, 90),
        )
    )

    rows = headline_rows(doc)

    assert doc["spanning_regions"] == ["untuned_module:pipe", "untuned_module:pipe.model"]
    assert by_label(rows) == pytest.approx(
        {
            "untuned_module:pipe.model.a": 30,
            "untuned_module:pipe.model.b": 50,
            "untuned_module:pipe (self)": 4,
            "untuned_module:pipe.model (self)": 16,
            "(residual)": 0,
        }
    )
    assert validate(doc) == []


def test_validate_names_flat_regions_that_are_not_the_spanning_regions_children():
    doc = build_profile(decoder_trace())
    doc["runs"][1]["regions"] = doc["runs"][1]["regions"][:1]
    doc["runs"][1]["residual"]["cpu_time_fraction"] += 0.15  # still adds up to 1

    assert validate(doc) == [f"runs[1].regions: not the children of the spanning region {GENERATE} in the run's tree"]


def test_the_terminal_summary_shows_the_headline():
    shown = terminal_text(profile_summary(build_profile(decoder_trace())), width=120)

    lines = [line.strip("│ ").split(" ")[0] for line in shown.splitlines() if line.startswith("│")]
    assert lines == [MODEL, GENERATE, HEAD, "(residual)"]  # largest first: generate's self time is 33 µs


def test_the_markdown_summary_and_per_run_attribution_show_the_headline():
    markdown = render_markdown(build_profile(decoder_trace()))

    summary = markdown.split("## Summary")[1].split("## Residual by cause")[0]
    assert f"| {GENERATE} (self) | 33.0% |" in summary
    assert "| _(residual)_ | 2.0% |" in summary
    attribution = markdown.split("## Per-Run Attribution")[1].split("##")[0]
    assert f"| 0 | {GENERATE} (self) | 1 | 0.033 | 33.0% | - | - |" in attribution
    assert f"| 0 | {GENERATE} |" not in attribution


def test_the_viewers_region_shares_are_the_headline():
    shares = tables.region_summary(build_profile(decoder_trace()), "cpu")

    assert shares["path"].tolist() == ["model", "lm_head", "generate (self)", "(residual)"]
    assert shares["fraction"].sum() == pytest.approx(1)


def test_compare_lines_the_headline_up_and_its_residual_is_outside_every_region():
    before, after = build_profile(decoder_trace(model_us=50)), build_profile(decoder_trace(model_us=30))

    diff = compare_profiles(before, after)

    assert [(row.path, row.change.before_us, row.change.after_us) for row in diff.headline] == [
        ("generate (self)", 33, 53),  # largest on either side first
        ("model", 50, 30),
        ("lm_head", 15, 15),
    ]
    assert (diff.residual.before_us, diff.residual.after_us) == pytest.approx((2, 2))
