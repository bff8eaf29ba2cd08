"""Each region's operator mix from hand-built traces: exact numbers, no torch."""

import pytest
from builders import op, region, run, span, trace

from aitune.analysis import read_trace_events
from aitune.analysis.region_operators import operator_category, region_operator_mixes
from aitune.report import build_profile, validate


def mixes_of(*events):
    return {key: mix.to_dict() for key, mix in region_operator_mixes(read_trace_events(trace(*events))).items()}


@pytest.mark.parametrize(
    ("name", "category"),
    [
        ("aten::conv2d", "conv"),
        ("aten::mkldnn_convolution", "conv"),
        ("aten::linear", "matmul"),
        ("aten::addmm", "matmul"),
        ("aten::_native_multi_head_attention", "attention"),
        ("aten::scaled_dot_product_attention", "attention"),
        ("aten::_transformer_encoder_layer_fwd", "attention"),
        ("aten::gru", "recurrent"),
        ("aten::lstm", "recurrent"),
        ("aten::rnn_tanh", "recurrent"),
        ("aten::gru_cell", "recurrent"),
        ("aten::group_norm", "elementwise_norm"),
        ("aten::add_", "elementwise_norm"),
        ("aten::silu", "elementwise_norm"),
        ("aten::max_pool2d", "elementwise_norm"),
        ("aten::adaptive_avg_pool2d", "elementwise_norm"),
        ("aten::copy_", "copy"),
        ("aten::item", "sync"),
        ("cudaStreamSynchronize", "sync"),
        ("aten::view", "other"),
        ("aten::embedding", "other"),
    ],
)
def test_operators_fall_into_the_category_of_their_name(name, category):
    assert operator_category(name) == category


def test_an_operator_and_the_ones_it_calls_count_once_under_the_outer_name():
    mixes = mixes_of(
        run(0, 0, 100),
        region("untuned_module:mlp", 10, 60),
        op("aten::linear", 20, 40),
        op("aten::t", 21, 22),
        op("aten::addmm", 22, 39),
        op("aten::gelu", 40, 45),
    )

    assert mixes == {
        (0, ("untuned_module:mlp",)): {"count": 2, "categories": {"matmul": 20.0, "elementwise_norm": 5.0}}
    }


def test_operators_belong_to_the_innermost_region_and_outside_ones_to_none():
    mixes = mixes_of(
        run(0, 0, 100),
        op("aten::mul", 1, 3),  # between modules: the residual's
        region("untuned_module:unet", 10, 90),
        op("aten::conv2d", 12, 20),
        region("untuned_module:unet.blocks.0", 30, 60),
        op("aten::conv2d", 31, 50),
        region("untuned_module:unet.blocks.1", 60, 80),
        op("aten::group_norm", 61, 65),
        run(1, 200, 300),
        region("untuned_module:unet", 210, 220),
        op("aten::conv2d", 211, 219),
        op("aten::conv2d", 400, 420),  # outside every run
    )

    assert mixes == {
        (0, ("untuned_module:unet",)): {"count": 1, "categories": {"conv": 8.0}},
        (0, ("untuned_module:unet", "untuned_module:unet.blocks.0")): {"count": 1, "categories": {"conv": 19.0}},
        (0, ("untuned_module:unet", "untuned_module:unet.blocks.1")): {
            "count": 1,
            "categories": {"elementwise_norm": 4.0},
        },
        (1, ("untuned_module:unet",)): {"count": 1, "categories": {"conv": 8.0}},
    }


def test_a_synchronize_call_outside_any_operator_is_sync_time_but_no_operator():
    sync = span("cudaStreamSynchronize", 20, 26, category="cuda_runtime")
    sync["args"] = {"correlation": 5}

    mixes = mixes_of(run(0, 0, 100), region("untuned_module:head", 10, 50), op("aten::item", 12, 15), sync)

    assert mixes == {(0, ("untuned_module:head",)): {"count": 1, "categories": {"sync": 9.0}}}


def test_the_document_puts_operators_on_tree_nodes_and_they_stay_within_the_self_time():
    doc = build_profile(
        trace(
            run(0, 0, 100),
            region("untuned_module:unet", 10, 90),
            op("aten::conv2d", 12, 20),
            region("untuned_module:unet.blocks.0", 30, 60),
            op("aten::conv2d", 31, 50),
            region("untuned_module:vae", 90, 95),
        )
    )

    assert validate(doc) == []
    unet, vae = doc["runs"][0]["tree"]
    assert unet["operators"] == {"count": 1, "categories": {"conv": 8.0}}
    assert sum(unet["operators"]["categories"].values()) <= unet["cpu_self_time_us"]
    assert unet["children"][0]["operators"] == {"count": 1, "categories": {"conv": 19.0}}
    assert vae["operators"] == {"count": 0, "categories": {}}
    assert all("operators" not in share for share in doc["runs"][0]["regions"])  # on the tree, not twice


def test_without_a_tree_the_flat_regions_carry_the_operators():
    doc = build_profile(trace(run(0, 0, 100), region("untuned_module:head", 10, 50), op("aten::linear", 12, 40)))

    assert "tree" not in doc["runs"][0]
    assert doc["runs"][0]["regions"][0]["operators"] == {"count": 1, "categories": {"matmul": 28.0}}
    assert validate(doc) == []
