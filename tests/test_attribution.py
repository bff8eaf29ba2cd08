"""Per-run attribution from hand-built traces: exact numbers, no torch."""

import pytest
from builders import kernel, launch, region, run, trace

from aitune.analysis import attribute_runs, read_trace_events
from aitune.analysis.events import Span
from aitune.analysis.intervals import columns, innermost_enclosing, parents
from aitune.report import build_profile, validate


def test_nested_region_time_is_counted_once():
    doc = trace(run(0, 0, 100), region("aot_module:unet", 10, 60), region("aot_module:inner", 20, 40))

    result = attribute_runs(read_trace_events(doc))

    top = result.runs[0].regions
    assert list(top) == ["aot_module:unet"]
    assert top["aot_module:unet"].cpu_time_us == 50
    assert list(top["aot_module:unet"].children) == ["aot_module:inner"]
    assert result.runs[0].residual() == {"cpu_time_us": 50.0, "cpu_time_fraction": 0.5}


def test_repeated_calls_in_one_run_aggregate_into_one_row():
    doc = trace(run(0, 0, 100), region("untuned_module:unet", 0, 20), region("untuned_module:unet", 30, 60))

    node = attribute_runs(read_trace_events(doc)).runs[0].regions["untuned_module:unet"]

    assert (node.calls, node.cpu_time_us) == (2, 50)


def test_each_region_span_belongs_to_the_run_that_encloses_it():
    doc = trace(
        run(0, 0, 100),
        region("untuned_module:a", 10, 30),
        run(1, 200, 250),
        region("untuned_module:a", 210, 215),
        region("untuned_module:b", 220, 240),
    )

    runs = attribute_runs(read_trace_events(doc)).runs

    assert {k: v.cpu_time_us for k, v in runs[0].regions.items()} == {"untuned_module:a": 20}
    assert {k: v.cpu_time_us for k, v in runs[1].regions.items()} == {"untuned_module:a": 5, "untuned_module:b": 20}


def test_device_time_of_a_region_comes_from_kernels_it_launched():
    doc = trace(
        run(0, 0, 100),
        region("untuned_module:unet", 10, 50),
        launch(20, correlation=1),
        launch(30, correlation=2),
        launch(70, correlation=3),  # glue between modules: device residual
        kernel("gemm", 25, 30, correlation=1),
        kernel("gemm", 60, 10, correlation=2),
        kernel("add", 90, 20, 3),
    )

    attributed = attribute_runs(read_trace_events(doc)).runs[0]

    assert attributed.device_time_us == 60
    assert attributed.regions["untuned_module:unet"].device_time_us == 40
    assert attributed.residual()["device_time_fraction"] == pytest.approx(20 / 60)


def test_device_time_of_a_nested_region_also_counts_for_its_parent():
    doc = trace(
        run(0, 0, 100),
        region("aot_module:outer", 0, 90),
        region("aot_module:inner", 10, 20),
        launch(15, correlation=1),
        launch(50, correlation=2),
        kernel("k1", 16, 5, correlation=1),
        kernel("k2", 51, 7, correlation=2),
    )

    outer = attribute_runs(read_trace_events(doc)).runs[0].regions["aot_module:outer"]

    assert outer.device_time_us == 12
    assert outer.children["aot_module:inner"].device_time_us == 5


def test_a_cpu_only_trace_has_no_device_domain():
    doc = trace(run(0, 0, 10), region("untuned_module:a", 1, 5))

    attributed = attribute_runs(read_trace_events(doc)).runs[0]

    assert attributed.device_time_us is None
    assert "device_time_us" not in attributed.residual()


def test_region_spans_outside_every_run_are_counted_as_unmapped():
    doc = trace(run(0, 0, 10), region("untuned_module:a", 1, 5), region("untuned_module:a", 20, 25))

    assert attribute_runs(read_trace_events(doc)).unmapped_region_spans == 1


def test_residual_is_clamped_at_zero():
    doc = trace(run(0, 0, 10), region("untuned_module:a", 0, 10.001))

    assert attribute_runs(read_trace_events(doc)).runs[0].residual()["cpu_time_us"] == 0


def test_document_fractions_add_up_to_one_per_domain():
    doc = trace(
        run(0, 0, 100),
        region("untuned_module:a", 0, 30),
        region("untuned_module:b", 40, 90),
        launch(5, 1),
        kernel("k", 10, 10, 1),
        launch(50, 2),
        kernel("k", 30, 30, 2),
        launch(95, 3),
        kernel("k", 99, 5, 3),
        config={"measured_runs": 1},
    )

    profile = build_profile(doc)

    assert validate(profile) == []
    run_doc = profile["runs"][0]
    for domain in ("cpu", "device"):
        total = (
            sum(r[f"{domain}_time_fraction"] for r in run_doc["regions"])
            + run_doc["residual"][f"{domain}_time_fraction"]
        )
        assert total == pytest.approx(1.0)


def test_wall_times_come_from_the_trace_metadata():
    doc = trace(run(0, 0, 100), run(1, 100, 150), run_wall_times_us=[120.0, 55.0])

    assert [r["timing"]["wall_time_us"] for r in build_profile(doc)["runs"]] == [120.0, 55.0]


def test_parents_and_innermost_follow_nesting_on_one_thread():
    spans = columns(
        [Span("a", 0, 10, (1, 1)), Span("b", 2, 3, (1, 1)), Span("c", 6, 2, (1, 1)), Span("d", 20, 1, (1, 1))]
    )

    assert parents(spans) == [None, 0, 0, None]
    assert innermost_enclosing(spans, [1, 3, 7, 15, 20.5]) == [0, 1, 2, None, 3]
