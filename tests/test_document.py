"""The profile document built from a trace: metadata, warnings, operator table, Markdown, schema, I/O."""

import gzip

import pytest
from builders import kernel, launch, op, region, run, trace
from documents import profile

from aitune.errors import ProfileError
from aitune.report import build_profile, load, read_trace, render_markdown, save, validate
from aitune.report.invariants import MAX_TREE_DEPTH
from aitune.report.model import as_profile, json_form

META = {
    "created_at": "2026-01-01T00:00:00+00:00",
    "aitune_version": "0.1.0",
    "config": {"warmup_runs": 0, "measured_runs": 1},
    "target": {"type": "demo.Pipe"},
    "input": {"args_count": 1, "kwargs": []},
    "profiler": {"activities": ["CPU"]},
    "regions": [{"id": "untuned_module:a", "name": "a", "kind": "untuned_module", "module_type": "demo.A"}],
}


def small_profile():
    return build_profile(
        trace(
            run(0, 0, 100), region("untuned_module:a", 10, 60), op("aten::mm", 20, 50), op("aten::add", 70, 80), **META
        )
    )


def test_regions_lists_observed_regions_with_their_capture_metadata():
    assert small_profile()["regions"] == META["regions"]


def test_an_observed_aot_region_unknown_at_capture_is_warned_and_marked_unknown():
    doc = build_profile(trace(run(0, 0, 10), region("aot_module:unet", 1, 5), **META))

    assert doc["regions"] == [
        {"id": "aot_module:unet", "name": "unet", "kind": "aot_managed_module", "wrapper_state": "unknown"}
    ]
    assert [w["code"] for w in doc["warnings"]] == ["UNREGISTERED_AOT_REGION"]


def test_fewer_runs_than_asked_for_is_warned():
    doc = build_profile(
        trace(run(0, 0, 10), region("untuned_module:a", 1, 5), **{**META, "config": {"measured_runs": 3}})
    )

    assert [w["code"] for w in doc["warnings"]] == ["RUN_COUNT_MISMATCH"]
    assert "1 measured run(s) but the capture asked for 3" in doc["warnings"][0]["message"]


def test_no_observed_region_is_warned_with_the_fix():
    doc = build_profile(trace(run(0, 0, 10), **{**META, "regions": []}))

    assert [w["code"] for w in doc["warnings"]] == ["NO_REGIONS_DISCOVERED"]


def test_operator_table_has_self_and_total_cpu_time_of_measured_runs_only():
    doc = build_profile(
        trace(
            run(0, 0, 100), op("aten::linear", 10, 50), op("aten::addmm", 20, 45), op("aten::linear", 200, 300), **META
        )
    )

    rows = {row["key"]: row for row in doc["profiler"]["key_averages"]["cpu_time_total"]}
    assert rows["aten::linear"] == {
        "key": "aten::linear",
        "device_type": "CPU",
        "count": 1,
        "self_cpu_time_total_us": 15.0,
        "cpu_time_total_us": 40.0,
    }
    assert rows["aten::addmm"]["self_cpu_time_total_us"] == 25.0
    assert "device_time_total" not in doc["profiler"]["key_averages"]


def test_operator_table_has_device_rows_when_kernels_ran():
    doc = build_profile(
        trace(run(0, 0, 100), op("aten::mm", 10, 50), launch(20, 1), kernel("sgemm", 30, 12, 1), **META)
    )

    views = doc["profiler"]["key_averages"]
    assert views["device_time_total"][0]["device_time_total_us"] == 12
    assert {(row["key"], row["device_type"]) for row in views["device_time_total"]} == {
        ("aten::mm", "CPU"),
        ("sgemm", "CUDA"),
    }


def test_markdown_is_deterministic_and_has_a_residual_row_per_run():
    doc = small_profile()

    text = render_markdown(doc)

    assert text == render_markdown(doc)
    assert "| 0 | _(residual)_ | - | 0.050 | 50.0% | - | - |" in text
    for heading in (
        "## Overview",
        "## Runs",
        "## Regions",
        "## Per-Run Attribution",
        "## Profiler Key Averages",
        "## Warnings",
    ):
        assert heading in text


def test_markdown_escapes_pipes_in_names():
    doc = small_profile()
    doc["regions"][0]["name"] = "a|b"

    assert "a\\|b" in render_markdown(doc)


def test_save_then_load_round_trips(tmp_path):
    doc = small_profile()

    loaded = load(save(doc, tmp_path / "nested" / "profile.json"))

    assert loaded == as_profile(doc) and as_profile(loaded) is loaded  # the record every reader takes as it is


def test_save_refuses_a_document_with_nan(tmp_path):
    doc = small_profile()
    doc["runs"][0]["timing"]["cpu_time_us"] = float("nan")

    with pytest.raises(ProfileError, match="refusing to write an invalid profile"):
        save(doc, tmp_path / "p.json")


def test_validate_names_the_json_path_of_a_bad_field():
    doc = small_profile()
    doc["runs"][0]["residual"]["cpu_time_fraction"] = -0.2

    assert validate(doc)[0].startswith("runs[0].residual.cpu_time_fraction: -0.2 is less than the minimum of 0")


def test_validate_reports_fractions_that_do_not_add_up():
    doc = small_profile()
    doc["runs"][0]["residual"]["cpu_time_fraction"] = 0.9

    assert validate(doc) == ["runs[0]: cpu region fractions plus residual add up to 1.4000, not 1"]


def nested_profile():
    """Region a (50 µs) holding a.b (20 µs): a's self time is 30 µs."""
    return profile([{"untuned_module:a": (50.0, {"untuned_module:a.b": 20.0})}], residual_us=50.0)


def test_validate_accepts_a_region_tree_whose_children_and_self_time_make_each_total():
    assert validate(nested_profile()) == []


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("children", 45.0, "runs[0].tree[0]: cpu children plus self time is 75.000 µs, not the total 50.000 µs"),
        ("self", 10.0, "runs[0].tree[0]: cpu children plus self time is 30.000 µs, not the total 50.000 µs"),
    ],
    ids=["children-exceed-the-parent", "self-time-too-small"],
)
def test_validate_reports_a_region_tree_that_does_not_add_up(field, value, problem):
    doc = nested_profile()
    parent = doc["runs"][0]["tree"][0]
    if field == "children":
        parent["children"][0].update(cpu_time_us=value, cpu_self_time_us=value)
    else:
        parent["cpu_self_time_us"] = value

    assert validate(doc) == [problem]


def test_validate_refuses_a_region_tree_nested_past_any_capture_and_names_a_deep_gap_by_its_path():
    doc = nested_profile()
    node = doc["runs"][0]["tree"][0]["children"][0]
    for _ in range(MAX_TREE_DEPTH):  # a chain of regions, each its parent's only child and all its time
        child = {**node, "region_id": node["region_id"] + ".x", "children": []}
        node["children"], node["cpu_self_time_us"] = [child], 0.0
        node = child

    assert validate(doc) == [
        f"runs[0].tree: regions nested more than {MAX_TREE_DEPTH} levels deep; no capture nests that deep, "
        "so the file was not written by one"
    ]
    doc["runs"][0]["tree"][0]["children"][0]["children"][0]["children"][0]["cpu_self_time_us"] = 1.0
    del doc["runs"][0]["tree"][0]["children"][0]["children"][0]["children"][0]["children"]
    doc["runs"][0]["tree"][0]["children"][0]["children"][0]["children"][0]["children"] = []

    assert validate(doc) == [
        "runs[0].tree[0].children[0].children[0].children[0]: cpu children plus self time is 1.000 µs, not the "
        "total 20.000 µs"
    ]


def test_markdown_draws_the_region_tree_of_the_median_run_not_the_slowest():
    spans = []
    for index, (run_us, inner_us) in enumerate([(100, 20), (300, 200), (200, 70)]):  # median: run 2, 200 µs
        start = index * 1000.0
        spans += [
            run(index, start, start + run_us),
            region("untuned_module:a", start + 5, start + run_us - 5),
            region("untuned_module:a.b", start + 10, start + 10 + inner_us),
        ]

    markdown = render_markdown(build_profile(trace(*spans)))

    section = markdown.split("## Region tree ")[1].split("\n## ")[0]
    assert section.startswith("(run 2, the median run)")
    assert "| · untuned_module:a.b | 1 | 0.070 | 0.070 | 35.0% | - | - |" in section


def test_load_accepts_an_aitune_document_and_leaves_out_a_key_no_version_defines(tmp_path):
    aitune_doc = {
        "schema_version": 1,
        "created_at": "2026-01-01T00:00:00Z",
        "aitune_version": "0.3.0",
        "config": {"warmup_runs": 3, "measured_runs": 1, "uses_inference_function": True},
        "target": {"type": "diffusers.StableDiffusionPipeline"},
        "input": {"args_count": 0, "kwargs": ["prompt"]},
        "runs": [
            {
                "run_index": 0,
                "timing": {"wall_time_us": 10.0, "cpu_time_us": 9.0, "device_time_us": 8.0},
                "regions": [
                    {
                        "region_id": "aot_module:unet",
                        "calls": 6,
                        "cpu_time_us": 6.0,
                        "cpu_time_fraction": 0.6667,
                        "device_time_us": 7.0,
                        "device_time_fraction": 0.875,
                    }
                ],
                "residual": {
                    "cpu_time_us": 3.0,
                    "cpu_time_fraction": 0.3333,
                    "device_time_us": 1.0,
                    "device_time_fraction": 0.125,
                },
            }
        ],
        "profiler": {"activities": ["CPU", "CUDA"], "key_averages": {"cpu_time_total": [], "device_time_total": []}},
        "regions": [
            {
                "id": "aot_module:unet",
                "name": "unet",
                "kind": "aot_managed_module",
                "module_type": "diffusers.UNet2DConditionModel",
                "wrapper_state": "tuned",
            }
        ],
        "warnings": [],
        "some_future_key": {"ignored": True},
    }
    (tmp_path / "aitune.json").write_text(__import__("json").dumps(aitune_doc))

    loaded = load(tmp_path / "aitune.json")

    assert json_form(loaded) == {key: value for key, value in aitune_doc.items() if key != "some_future_key"}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "not a profile document"),
        (b'{"schema_version": 2, "runs": []}', "schema_version 2 is newer than this aitune reads (1); upgrade aitune."),
        (gzip.compress(b'{"schema_version": 1}', mtime=0)[:-8], "the gzip data is truncated or corrupt"),
    ],
)
def test_load_names_the_file_and_the_problem(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)

    with pytest.raises(ProfileError, match=r"bad\.json") as error:
        load(path)

    assert message in str(error.value)


def test_read_trace_reads_gzipped_traces(tmp_path):
    path = tmp_path / "trace.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": []}'))

    assert read_trace(path) == {"traceEvents": []}


def test_load_of_a_missing_file_says_so(tmp_path):
    with pytest.raises(ProfileError, match="no such file"):
        load(tmp_path / "missing.json")
