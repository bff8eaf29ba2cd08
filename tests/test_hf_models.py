"""Tiny Hugging Face models (transformers, diffusers) under capture: regions, tree, headline, Σ = 1, same outputs."""

import functools

import pytest
import torch
from hf_models import WORKLOADS

import aitune.torch as ait
from aitune.report import headline_rows, validate
from aitune.report.headline import looks_through
from aitune.suggest import suggest


@functools.cache
def captured(name):
    """The profile of one workload (1 warmup, 2 runs), its output without capture, and its outputs under capture."""
    obj, input_data, infer = WORKLOADS[name]()
    call = infer or obj
    plain = call(input_data)
    outputs = []
    prof = ait.profile(obj, input_data, lambda x: outputs.append(call(x)), warmup_runs=1, measured_runs=2)
    return prof.data, plain, outputs


def children(node):
    return [child["region_id"] for child in node["children"]]


def headline_paths(doc):
    return [row.path for row in headline_rows(doc)]


def shown(doc, path):
    """How the headline shows a top-level region by the one rule (`looks_through`): itself, or its self row."""
    nodes = [next(n for n in run["tree"] if n["region_id"] == f"untuned_module:{path}") for run in doc["runs"]]
    through = looks_through([n["cpu_time_fraction"] for n in nodes], [bool(n["children"]) for n in nodes])
    return f"{path} (self)" if through else path


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_every_workload_gives_a_valid_profile_whose_headline_adds_up(name):
    doc, _, _ = captured(name)

    assert validate(doc) == []
    rows = headline_rows(doc)
    for index in range(len(doc["runs"])):
        assert sum(row.fractions[index] for row in rows) == pytest.approx(1)


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_outputs_are_bitwise_identical_with_and_without_capture(name):
    doc, plain, outputs = captured(name)

    # the warmups (runs set aside as still warming up among them), 2 measured runs, 1 operator run
    assert len(outputs) == doc["warmup"]["performed"] + 2 + 1
    assert all(torch.equal(plain, output) for output in outputs)


def test_the_llama_decoder_has_model_and_lm_head_under_generate_and_the_headline_shows_them():
    doc, _, _ = captured("llama")

    assert "untuned_module:generate" in [meta["id"] for meta in doc["regions"]]  # the root's entry method
    (generate,) = doc["runs"][0]["tree"]
    assert generate["region_id"] == "untuned_module:generate"
    assert children(generate) == ["untuned_module:model", "untuned_module:lm_head"]
    assert [child["calls"] for child in generate["children"]] == [4, 4]  # one forward per new token
    assert doc["spanning_regions"] == ["untuned_module:generate"]
    assert [share["region_id"] for share in doc["runs"][0]["regions"]] == children(generate)  # AITune's flat view
    # the model is shown whole, or as its layers and its self row when it holds 90% of the run (`looks_through`)
    models = [run["tree"][0]["children"][0] for run in doc["runs"]]
    through = looks_through([node["cpu_time_fraction"] for node in models], [bool(node["children"]) for node in models])
    model_rows = [f"model.{path}" for path in ("rotary_emb", "layers.0", "layers.1", "norm")] + ["model (self)"]
    shown_model = model_rows if through else ["model"]
    assert headline_paths(doc) == [*shown_model, "lm_head", "generate (self)", "(residual)"]


def test_the_t5_encoder_decoder_runs_the_encoder_once_and_the_decoder_per_token_under_generate():
    doc, _, _ = captured("t5")

    (generate,) = doc["runs"][0]["tree"]
    calls = {child["region_id"]: child["calls"] for child in generate["children"]}
    assert calls == {"untuned_module:encoder": 1, "untuned_module:decoder": 4, "untuned_module:lm_head": 4}
    assert headline_paths(doc) == ["encoder", "decoder", "lm_head", "generate (self)", "(residual)"]


def test_the_bert_encoders_time_splits_at_the_top_and_the_encoder_is_shown_by_the_one_rule():
    doc, _, _ = captured("bert")

    assert "spanning_regions" not in doc
    paths = headline_paths(doc)
    assert {"embeddings", shown(doc, "encoder"), "pooler"} <= set(paths) and paths[-1] == "(residual)"
    encoder = next(node for node in doc["runs"][0]["tree"] if node["region_id"] == "untuned_module:encoder")
    assert children(encoder) == ["untuned_module:encoder.layer.0", "untuned_module:encoder.layer.1"]


def test_the_diffusion_pipeline_finds_the_unet_in_its_loop_and_vae_decode():
    doc, _, _ = captured("diffusion")

    top = {node["region_id"]: node for node in doc["runs"][0]["tree"]}
    assert list(top) == ["untuned_module:unet", "untuned_module:vae.decode"]
    assert top["untuned_module:unet"]["calls"] == 3  # one per denoising step
    assert "untuned_module:unet.mid_block" in children(top["untuned_module:unet"])
    assert children(top["untuned_module:vae.decode"]) == ["untuned_module:vae.decoder"]
    paths = headline_paths(doc)  # the unet has a sibling: looked through only when it holds 90% of the run
    assert shown(doc, "unet") in paths and paths[-2:] == ["vae.decode", "(residual)"]


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_suggest_names_modules_never_entry_methods(name):
    doc, _, _ = captured(name)
    methods = {region["id"]: region["method"] for region in doc["regions"] if "method" in region}

    suggestions = suggest(doc)

    assert suggestions.targets, "suggest found nothing to tune"
    for target in suggestions.targets:
        assert target.path not in ("generate", "decode") and not target.path.endswith((".generate", ".decode"))
        if target.region_id in methods:  # a method region stands for its module, whose path is the target
            assert target.path == target.region_id.partition(":")[2].removesuffix(f".{methods[target.region_id]}")
