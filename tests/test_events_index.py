"""The events model is indexed once when it is built, then frozen: per-thread views and the device join."""

import dataclasses

import pytest
from builders import kernel, launch, op, region, run, trace

from aitune.analysis import intervals, read_trace_events
from aitune.analysis.membership import node_keys
from aitune.report import profile_from_events

WORKER = (1, 2)


def two_thread_trace():
    return trace(
        run(0, 0, 100),
        region("untuned_module:unet", 10, 60),
        op("aten::conv2d", 20, 50),
        op("aten::convolution", 21, 49),
        op("aten::add", 70, 80),
        launch(30, correlation=7),
        kernel("conv_kernel", 35, 4, correlation=7),
        kernel("conv_kernel_tail", 40, 2, correlation=7),
        op("aten::mm", 5, 15, thread=WORKER),
        region("untuned_module:worker", 1, 30, thread=WORKER),
    )


def test_each_thread_view_holds_that_threads_events_only():
    events = read_trace_events(two_thread_trace())

    main, worker = events.threads[(1, 1)], events.threads[WORKER]

    assert [events.runs[i].thread for i in main.runs] == [(1, 1)]
    assert [events.regions[i].name for i in main.regions] == ["aitune::region::untuned_module:unet"]
    assert [events.ops.names[i] for i in main.ops] == ["aten::conv2d", "aten::convolution", "aten::add"]
    assert [events.launches[i].correlation for i in main.launches] == [7]
    assert (worker.runs, worker.launches) == ((), ())
    assert [events.ops.names[i] for i in worker.ops] == ["aten::mm"]
    assert [events.regions[i].name for i in worker.regions] == ["aitune::region::untuned_module:worker"]


def test_a_threads_operators_are_nested_once_in_the_view():
    view = read_trace_events(two_thread_trace()).threads[(1, 1)]

    assert view.op_parents.tolist() == [-1, 0, -1]  # convolution inside conv2d; add on its own
    assert view.op_order.tolist() == [0, 1, 2]
    assert (view.op_starts_us.tolist(), view.op_durations_us.tolist()) == ([20.0, 21.0, 70.0], [30.0, 28.0, 10.0])


def test_operators_listed_out_of_order_are_nested_parents_first():
    events = read_trace_events(trace(run(0, 0, 100), op("aten::relu", 30, 35), op("aten::linear", 10, 40)))

    view = events.threads[(1, 1)]

    assert view.op_order.tolist() == [1, 0]
    assert view.op_parents.tolist() == [1, -1]


def test_device_work_is_joined_to_its_launch_by_correlation_id():
    events = read_trace_events(two_thread_trace())

    assert [activity.name for activity in events.device_of[7]] == ["conv_kernel", "conv_kernel_tail"]
    assert set(events.device_of) == {7}


def test_the_model_cannot_be_changed_once_built():
    events = read_trace_events(two_thread_trace())

    with pytest.raises(dataclasses.FrozenInstanceError):
        events.runs = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        events.threads[(9, 9)] = events.threads[(1, 1)]  # type: ignore[index]
    with pytest.raises(TypeError):
        events.device_of[8] = ()  # type: ignore[index]
    assert isinstance(events.regions, tuple) and isinstance(events.ops.names, tuple)
    with pytest.raises(ValueError, match="read-only"):
        events.ops.starts_us[0] = 0.0
    with pytest.raises(ValueError, match="read-only"):
        events.threads[(1, 1)].op_parents[0] = 0


def test_a_thread_the_trace_does_not_show_has_an_empty_view():
    events = read_trace_events(two_thread_trace())

    view = events.thread((5, 5))

    assert (view.runs, view.regions, view.launches, len(view.ops)) == ((), (), (), 0)


OUTER, INNER, STRAY = "untuned_module:block", "untuned_module:block.attn", "untuned_module:stray"


def nested_regions_trace():
    """Two runs, each with a region holding a nested one; operators in each level, one outside every region
    of a run, and a region and an operator outside every run."""
    return trace(
        run(0, 0, 100),
        region(OUTER, 10, 60),
        region(INNER, 20, 40),
        op("aten::linear", 25, 30),
        op("aten::add", 45, 50),
        op("aten::item", 70, 75),
        launch(26, correlation=1),
        run(1, 200, 300),
        region(OUTER, 210, 260),
        region(INNER, 220, 240),
        op("aten::linear", 225, 230),
        region(STRAY, 110, 140),
        op("aten::mul", 120, 130),
    )


def test_each_spans_run_and_region_are_found_when_the_model_is_built():
    events = read_trace_events(nested_regions_trace())

    view = events.threads[(1, 1)]

    assert [events.ops.names[i] for i in view.ops] == [
        "aten::linear",
        "aten::add",
        "aten::item",
        "aten::linear",
        "aten::mul",
    ]
    assert view.op_runs.tolist() == [0, 0, 0, 1, -1]  # aten::mul ran between the runs
    assert view.op_regions.tolist() == [1, 0, -1, 3, 4]  # the innermost region; aten::item in none
    assert (view.launch_runs.tolist(), view.launch_regions.tolist(), view.launch_ops.tolist()) == ([0], [1], [0])
    assert view.region_runs.tolist() == [0, 0, 1, 1, -1]
    assert view.region_parents.tolist() == [-1, 0, -1, 2, -1]
    assert view.region_depths.tolist() == [1, 2, 1, 2, 1]
    assert node_keys(events.runs, events.region_tree) == [
        (0, (OUTER,)),
        (0, (OUTER, INNER)),
        (1, (OUTER,)),
        (1, (OUTER, INNER)),
    ]
    assert view.region_nodes.tolist() == [0, 1, 2, 3, -1]  # the stray region is in no run's tree
    with pytest.raises(ValueError, match="read-only"):
        view.op_regions[0] = 0


def test_runs_and_regions_are_searched_once_when_the_model_is_built_and_never_by_the_analyses(monkeypatch):
    searches = []
    for name in ("_sweep", "_cell_lookup", "_nested_parents", "_parents_by_stack"):  # every search of spans by time
        real = getattr(intervals, name)
        monkeypatch.setattr(intervals, name, lambda *args, name=name, real=real: searches.append(name) or real(*args))

    events = read_trace_events(nested_regions_trace())
    assert searches  # the model's indexes are found here

    searches.clear()
    doc = profile_from_events(events)

    assert searches == []  # the document reads them
    tree = doc["runs"][1]["tree"]
    assert [(node["region_id"], [child["region_id"] for child in node["children"]]) for node in tree] == [
        (OUTER, [INNER])
    ]
    assert doc["runs"][1]["tree"][0]["children"][0]["operators"] == {"count": 1, "categories": {"matmul": 5.0}}
