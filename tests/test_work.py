"""Work per operator and per region, torch-free: torch's FLOP formulas written again, the time that
no formula counts, and a synthetic device trace (no GPU here) for the device-time path."""

from __future__ import annotations

import json

import pytest
from builders import kernel, launch, op, region, run, shaped, trace

from aitune.analysis.events import read_trace_events
from aitune.analysis.trace_json import trace_events_from_json
from aitune.analysis.work import OpInputs, operator_inputs, operator_work
from aitune.report import build_profile, render_markdown
from aitune.report.efficiency import region_efficiencies
from aitune.report.validate import validate


def inputs(dims: list, types: list, concrete: list | None = None) -> OpInputs | None:
    return operator_inputs({"Input Dims": dims, "Input type": types, "Concrete Inputs": concrete or [""] * len(dims)})


def test_matrix_products_count_two_flops_per_multiply_add_and_their_compulsory_bytes():
    linear = operator_work("aten::linear", inputs([[2, 5, 16], [8, 16], [8]], ["float"] * 3))
    addmm = operator_work("aten::addmm", inputs([[8], [10, 16], [16, 8], [], []], ["float"] * 3 + ["Scalar"] * 2))
    halves = operator_work("aten::bmm", inputs([[4, 3, 6], [4, 6, 5]], ["c10::Half"] * 2))

    assert linear == (2 * 10 * 16 * 8, 4 * (2 * 5 * 16 + 8 * 16 + 8 + 2 * 5 * 8), "float32")
    assert addmm.flops == linear.flops
    assert halves == (2 * 4 * 3 * 6 * 5, 2 * (4 * 3 * 6 + 4 * 6 * 5 + 4 * 3 * 5), "float16")


def test_matmul_broadcasts_batches_and_drops_promoted_vector_dimensions():
    batched = operator_work("aten::matmul", inputs([[7, 1, 3, 4], [5, 4, 2]], ["float", "float"]))
    vector = operator_work("aten::matmul", inputs([[3, 4], [4]], ["float", "float"]))

    assert batched.flops == 2 * (7 * 5) * 3 * 4 * 2
    assert vector == (2 * 3 * 4, 4 * (12 + 4 + 3), "float32")


def test_convolutions_count_output_pixels_times_the_weight_and_transposed_ones_input_pixels():
    types = ["float"] * 3 + ["ScalarList"] * 3 + ["Scalar"]
    strided = operator_work(
        "aten::conv2d",
        inputs(
            [[2, 4, 9, 9], [6, 2, 3, 3], [6], [], [], [], []], types, ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "2"]
        ),
    )
    same = operator_work(
        "aten::conv1d",
        inputs([[1, 3, 10], [4, 3, 5], [], [], [], [], []], types, ["", "", "", "[1]", "same", "[1]", "1"]),
    )
    transposed = operator_work(
        "aten::conv_transpose2d",
        inputs(
            [[1, 4, 5, 5], [4, 3, 3, 3], [3], [], [], [], [], []],
            ["float"] * 3 + ["ScalarList"] * 3 + ["Scalar", "ScalarList"],
            ["", "", "", "[2, 2]", "[0, 0]", "[0, 0]", "1", "[1, 1]"],
        ),
    )

    assert strided.flops == 2 * 2 * (5 * 5) * (6 * 2 * 3 * 3)  # out 5×5: (9 + 2 - 2 - 1) // 2 + 1
    assert same.flops == 2 * 1 * 10 * (4 * 3 * 5)
    assert transposed.flops == 2 * 1 * (5 * 5) * (4 * 3 * 3 * 3)
    assert transposed.bytes == 4 * (4 * 25 + 4 * 27 + 3 + 3 * 11 * 11)  # out 11×11: (5 - 1)·2 + 2 + 1


def test_attention_counts_both_products_and_its_kernels_own_layout():
    bhsd = operator_work(
        "aten::scaled_dot_product_attention", inputs([[2, 3, 5, 8], [2, 3, 7, 8], [2, 3, 7, 4]], ["float"] * 3)
    )
    bshd = operator_work(
        "aten::_flash_attention_forward", inputs([[2, 5, 3, 8], [2, 7, 3, 8], [2, 7, 3, 4]], ["c10::BFloat16"] * 3)
    )

    assert bhsd.flops == 2 * 2 * 3 * 5 * 7 * (8 + 4)
    assert bshd.flops == bhsd.flops
    assert bshd.dtype == "bfloat16"


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("aten::relu", {"Input Dims": [[4]], "Input type": ["float"]}),  # no formula
        ("aten::mm", None),  # no shapes recorded
        ("aten::mm", {"Input Dims": [[2, 3], [4, 5]], "Input type": ["float", "float"]}),  # inner dimensions differ
        ("aten::mm", {"Input Dims": [[2, 3], [3, "x"]], "Input type": ["float", "float"]}),  # not a shape
        ("aten::mm", {"Input Dims": [[2, 3], [3, 5]], "Input type": ["float", "c10::Mystery"]}),  # unknown dtype
        (
            "aten::conv2d",
            {
                "Input Dims": [[1, 1, 4, 4], [1, 1, 3, 3]],
                "Input type": ["float"] * 2,
                "Concrete Inputs": ["", "", "", "import os", "", "", ""],
            },
        ),
    ],
)
def test_an_operator_without_a_formula_or_readable_shapes_has_no_work_rather_than_zero(name, args):
    assert operator_work(name, operator_inputs(args)) is None


def _device_trace() -> dict:
    """SYNTHETIC device trace (no GPU at hand): one run, one region holding a 64×32×16 ``aten::mm``
    whose kernel ran 10 µs, and a ``aten::relu`` without a formula whose kernel ran 30 µs."""
    return trace(
        run(0, 0, 1000),
        region("untuned_module:block", 10, 900),
        shaped("aten::mm", 20, 100, [[64, 32], [32, 16]], ["float", "float"]),
        launch(30, correlation=1),
        kernel("sgemm_synthetic", 200, 10, correlation=1),
        op("aten::relu", 120, 200),
        launch(130, correlation=2),
        kernel("relu_synthetic", 300, 30, correlation=2),
        environment={
            "machine_peaks": {
                "cuda": {"gemm_flops_per_s": {"float32": 1e12}, "copy_bytes_per_s": 1e11, "source": "synthetic"}
            }
        },
    )


def test_a_synthetic_device_trace_places_the_region_by_its_kernels_time_against_the_devices_roofs():
    doc = build_profile(_device_trace())

    work = doc["runs"][0]["regions"][0]["work"]
    (found,) = region_efficiencies(doc)

    assert (work["flops"], work["counted_device_time_us"], work["uncounted_device_time_us"]) == (
        2 * 64 * 32 * 16,
        10.0,
        30.0,
    )
    assert work["uncounted_operators"] == {"aten::relu": 80.0}
    assert found.domain == "device"
    assert found.flops_per_s == pytest.approx(2 * 64 * 32 * 16 / 10e-6)
    assert found.fraction_of_roof == pytest.approx(
        max(2 * 64 * 32 * 16 / 1e12, 4 * (64 * 32 + 32 * 16 + 64 * 16) / 1e11) / 10e-6
    )
    assert found.mostly_uncounted  # 30 of its 40 kernel µs have no formula
    assert validate(doc) == []


def test_every_trace_reader_gives_the_same_work():
    document = _device_trace()

    typed = trace_events_from_json(lambda: json.dumps(document).encode(), "t.json", json.loads)

    assert typed.op_inputs == read_trace_events(document).op_inputs
    assert build_profile(typed) == build_profile(document)


def test_markdown_says_a_mostly_uncounted_region_is_not_known_rather_than_zero():
    text = render_markdown(build_profile(_device_trace()))

    assert "## Work and Efficiency" in text
    assert "uncounted (aten::relu): its work is not known, not zero" in text


def test_a_trace_without_recorded_shapes_has_no_work_keys_and_says_so():
    doc = build_profile(trace(run(0, 0, 100), region("untuned_module:block", 10, 90), op("aten::mm", 20, 80)))

    assert "work" not in doc["runs"][0]["regions"][0]
    assert "No operator shapes recorded in this profile" in render_markdown(doc)


def test_the_viewer_draws_the_regions_on_the_roofline_and_lists_their_work():
    from aitune.viewer import figures, views
    from aitune.viewer.selection import Selection
    from aitune.viewer.sources import Loaded
    from aitune.viewer.store import ProfileStore

    store = ProfileStore(before=Loaded("synthetic.json", build_profile(_device_trace())))

    regions = store.efficiency_table()
    plot = figures.roofline(regions, store.machine_peaks())
    shown = views.Efficiency(store=store, selection=Selection())._render()

    assert regions[["region_id", "domain", "flops"]].values.tolist() == [["untuned_module:block", "device", 65536.0]]
    assert (plot.x_scale.__class__.__name__, plot.y_scale.__class__.__name__) == ("LogScale", "LogScale")
    assert [item.label["value"] for item in plot.legend.items] == ["before cuda float32"]
    assert len(shown) == 3  # the note, the roofline, the table


def test_a_regions_work_includes_its_childrens_and_an_operator_is_counted_once_at_its_outermost_formula():
    mm = ([[8, 4], [4, 2]], ["float", "float"])
    doc = build_profile(
        trace(
            run(0, 0, 1000),
            region("untuned_module:outer", 10, 900),
            shaped("aten::linear", 20, 100, [[8, 4], [2, 4]], ["float", "float"]),
            shaped("aten::addmm", 30, 90, [[2], [8, 4], [4, 2], [], []], ["float"] * 3 + ["Scalar"] * 2),
            region("untuned_module:outer.inner", 200, 400),
            shaped("aten::mm", 210, 300, *mm),
        )
    )

    found = {item.region_id: item for item in region_efficiencies(doc)}

    assert found["untuned_module:outer.inner"].flops == 2 * 8 * 4 * 2
    assert found["untuned_module:outer"].flops == 2 * (2 * 8 * 4 * 2)  # its linear once, and its child's mm
    assert found["untuned_module:outer"].counted_us == 80 + 90


def test_a_profile_with_a_region_tree_but_no_shapes_shows_no_work_rather_than_zero_work():
    from pathlib import Path

    from aitune.report import load
    from aitune.report.efficiency import has_work

    doc = load(Path(__file__).resolve().parent.parent / "sample_traces" / "tuned-pipeline" / "before" / "profile.json")
    assert any(run.tree for run in doc.runs)  # nested regions: the tree path of the sum

    assert not has_work(doc) and region_efficiencies(doc) == []
    assert "No operator shapes recorded in this profile" in render_markdown(doc)
