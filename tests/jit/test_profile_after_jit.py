"""A profile after JIT tuning shows tuned modules as ``jit_module`` regions; untuned siblings stay discovered."""

from __future__ import annotations

import torch
from documents import region_shares
from pipeline_app import Pipeline

import aitune.torch as ait
from aitune.torch import jit

from .conftest import config

TOKENS = torch.randint(0, 1000, (1, 8), generator=torch.Generator().manual_seed(0))


def tuned_pipeline(**options) -> Pipeline:
    with jit.intercept(config(**options)):
        pipe = Pipeline(steps=2, size=16)
    pipe(TOKENS)  # the denoiser runs twice a call: it tunes here, the encoder and decoder on the next call
    pipe(TOKENS)
    return pipe


def test_the_tuned_pipeline_profiles_as_jit_regions_in_state_tuned_outside_the_residual():
    pipe = tuned_pipeline()

    prof = ait.profile(pipe, {"token_ids": TOKENS}, warmup_runs=0, measured_runs=2)

    regions = {region["id"]: region for region in prof.data["regions"]}
    jit_regions = ["jit_module:TextEncoder", "jit_module:Denoiser", "jit_module:Decoder"]
    assert [regions[region]["wrapper_state"] for region in jit_regions] == ["tuned"] * 3
    assert regions["jit_module:Denoiser"]["kind"] == "jit_managed_module"
    fractions = region_shares(prof.data["runs"][0])
    residual = prof.data["runs"][0]["residual"]["cpu_time_fraction"]
    assert all(fractions[region] > 0 for region in jit_regions)
    assert sum(fractions[region] for region in jit_regions) > residual


def test_a_skipped_module_of_the_pipeline_is_still_discovered_as_untuned():
    pipe = tuned_pipeline(skip=("Decoder",), max_depth=0)

    prof = ait.profile(pipe, {"token_ids": TOKENS}, warmup_runs=0, measured_runs=1)

    assert set(region_shares(prof.data["runs"][0])) == {
        "jit_module:TextEncoder",
        "jit_module:Denoiser",
        "untuned_module:vae.decode",  # the decoder's forward runs inside decode(): one span
    }
    assert "untuned_module:vae.up" in {region["id"] for region in prof.data["regions"]}
