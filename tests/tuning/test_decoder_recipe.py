"""The decoder recipe (`aitune.torch.decoder_recipe`): a transformers decoder's ``generate`` with a static cache and
its step compiled whole, offered beside compiling the modules, kept only as the loop keeps anything, and
recorded in the plan so that applying it sets the cache again."""

from __future__ import annotations

import copy

import pytest
import torch
from hf_models import llama_decoder, llama_generate
from torch import nn

from aitune.cli.loop import recipe_lines
from aitune.compare.gains import whole_model_forecast, with_settings_cost
from aitune.compare.verification import VerifyConfig
from aitune.errors import TuningError
from aitune.report.formatting import factor
from aitune.torch import LoopConfig, optimize
from aitune.torch.backends import BACKENDS, InductorBackend
from aitune.torch.decoder_recipe import RECIPE, offers_recipe
from aitune.torch.tuning.paths import unwrap
from aitune.torch.tuning.plan_apply import apply_plan
from aitune.torch.tuning.plan_check import load_plan

from .conftest import FAST_MEASURE
from .test_stateful_inputs import ForwardAgain

pytestmark = pytest.mark.slow

QUICK = {"warmup_runs": 1, "measured_runs": 2, "record_calls": 1}


def forward_again_loop(**options) -> LoopConfig:
    from aitune.torch.tuning.strategies import OneBackendStrategy

    return LoopConfig(strategy=OneBackendStrategy(ForwardAgain(), measure=FAST_MEASURE), **QUICK, **options)


def test_the_recipe_is_offered_for_a_decoder_whose_cache_is_dynamic_and_nothing_else():
    model, _, _ = llama_decoder()

    offered = offers_recipe(model)
    model.generation_config.cache_implementation = "static"

    assert offered and not offers_recipe(model)  # the user chose a cache already
    assert not offers_recipe(nn.Linear(2, 2))


def test_a_kept_recipe_generates_with_a_static_cache_and_its_plan_sets_it_again(monkeypatch):
    monkeypatch.setitem(BACKENDS, ForwardAgain.name, ForwardAgain)
    model, ids, infer = llama_decoder()
    expected = llama_generate(model, ids)

    result = optimize(model, ids, infer, config=forward_again_loop(verification=None))
    try:
        during = model.generation_config.cache_implementation
        tokens = llama_generate(model, ids)
        tuned = [region.path for region in result.tuned]
        printed = recipe_lines(result)  # what tune prints while the recipe is kept
    finally:
        result.restore()

    assert tuned == [""] and during == "static"
    whole = next(gain for gain in result.gains if gain.path == "")
    # suggest's forecast, though nothing was weighed, with what the static cache cost the eager run (timed) added
    cost = result.tuning["generation_cost"]
    assert 0.2 < cost < 5 and whole.predicted_speedup == with_settings_cost(
        whole_model_forecast(result.suggestions), cost
    )
    assert whole.predicted_speedup is not None and result.whole_model is None
    assert torch.equal(tokens, expected)
    assert result.plan["generation"] == result.generation == {"cache_implementation": "static"}
    assert printed == [
        f"decoder recipe kept ({RECIPE}): generate now runs with generation_config.cache_implementation='static' "
        f"(eager, it took {factor(cost)} the time; the forecast counts that); applying the plan sets it again"
    ]
    assert model.generation_config.cache_implementation is None  # restore puts the setting back too
    plan = copy.deepcopy(result.plan)  # as it would read had Inductor won: a backend every aitune knows
    for region in plan["regions"]:
        for saved in (region["backends"], region["wrapper"]["tuned_backends"]):
            saved.update({gid: InductorBackend().to_dict() for gid in saved})
    fresh, _, _ = llama_decoder()
    applied = apply_plan(fresh, plan)
    try:
        assert fresh.generation_config.cache_implementation == "static"
        assert torch.equal(llama_generate(fresh, ids), expected)
        assert applied.generation_before == {"cache_implementation": None}
    finally:
        unwrap(fresh, list(applied.wrappers))


def test_a_recipe_that_does_not_make_the_run_faster_is_put_back_with_the_setting(monkeypatch):
    monkeypatch.setitem(BACKENDS, ForwardAgain.name, ForwardAgain)
    model, ids, infer = llama_decoder()
    verify = VerifyConfig(min_rounds=6, max_rounds=6)

    result = optimize(model, ids, infer, config=forward_again_loop(verification=verify))
    tuned = [region.path for region in result.tuned]
    result.restore()

    whole = next(gain for gain in result.gains if gain.path == "")
    assert whole.check is not None and not whole.check.kept  # the same forward is no faster beyond noise
    assert "generation" not in result.plan and "" not in tuned
    assert model.generation_config.cache_implementation is None


@pytest.mark.parametrize(
    ("generation", "problem"),
    [
        ({"cache_implementation": "offloaded"}, "generation.cache_implementation: 'offloaded' is not one of"),
        (
            {"attn_implementation": "eager"},
            "generation: 'attn_implementation' was unexpected here (known: cache_implementation)",
        ),
    ],
)
def test_a_plan_may_set_only_the_recipe_s_static_cache(generation, problem):
    plan = {"schema_version": 1, "kind": "aitune-plan", "generation": generation, "regions": []}

    with pytest.raises(TuningError) as refused:
        load_plan(plan)

    assert problem in str(refused.value)
