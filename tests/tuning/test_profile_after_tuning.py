"""A profile captured after tuning shows the tuned modules as ``aot_module`` regions in state ``tuned``."""

from __future__ import annotations

import torch
from torch import nn

import aitune.torch as ait

from .conftest import FAST_MEASURE, tiny_mlp


def test_a_tuned_module_is_an_aot_region_in_state_tuned():
    model = nn.Sequential(tiny_mlp(), nn.Softmax(dim=-1))
    x = torch.randn(2, 8)
    wrappers = ait.wrap(model, "0")
    try:
        ait.tune(model, [x], strategy=ait.OneBackendStrategy(ait.EagerBackend(), measure=FAST_MEASURE))

        prof = ait.profile(model, x, warmup_runs=0, measured_runs=2)
    finally:
        ait.unwrap(model, list(wrappers))

    regions = {region["id"]: region for region in prof.data["regions"]}
    assert regions["aot_module:0"]["wrapper_state"] == "tuned"
    assert regions["aot_module:0"]["kind"] == "aot_managed_module"
    assert [r["region_id"] for r in prof.data["runs"][0]["regions"]] == ["aot_module:0", "untuned_module:1"]
