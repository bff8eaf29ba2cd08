"""A plan replays wherever the workload ran: a decoder fed a cache object (`DynamicCache`, `StaticCache`) is
rebuilt on its first real calls in a fresh process and gives eager's tokens on prompts it never saw."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hf_models import llama_decoder, llama_generate

from aitune.torch.backends import BACKENDS
from aitune.torch.graphs.graph_spec import parse_structure

from .test_stateful_inputs import ForwardAgain, write_inductor_plan

TESTS = Path(__file__).resolve().parent.parent
CACHES = ("dynamic", "static")


def write_llama_plan(path: Path, monkeypatch) -> dict:
    """A plan for the Llama-style decoder's ``model`` as tune would write it had Inductor won, recorded on a
    ``generate`` with each cache."""
    monkeypatch.setitem(BACKENDS, ForwardAgain.name, ForwardAgain)
    model, ids, _ = llama_decoder()
    return write_inductor_plan(path, model, "model", lambda: [llama_generate(model, ids, cache) for cache in CACHES])


@pytest.mark.slow
def test_a_llama_plan_with_dynamic_and_static_caches_replays_in_a_fresh_process_on_unseen_prompts(
    tmp_path, monkeypatch
):
    saved = write_llama_plan(tmp_path / "plan.json", monkeypatch)
    cache_types = {parse_structure(graph["structure"]).objects[0] for graph in saved["graphs"]}

    script = f"""
import sys, torch
sys.path[:0] = [{str(TESTS)!r}, {str(TESTS.parent / "benchmarks")!r}]  # hf_models and its tiny configs
import aitune.torch as ait
from hf_models import llama_decoder, llama_generate as generate
model, _, _ = llama_decoder()
CACHES = {CACHES!r}
prompts = [torch.randint(3, 96, (2, 11), generator=torch.Generator().manual_seed(11))]  # unseen batch, length
before = {{cache: [generate(model, ids, cache) for ids in prompts] for cache in CACHES}}
applied = ait.apply_plan(model, {str(tmp_path / "plan.json")!r})
after = {{cache: [generate(model, ids, cache) for ids in prompts] for cache in CACHES}}
runners = applied.wrappers["model"]._self_runners.values()
print("SAME", {{cache: all(torch.equal(a, b) for a, b in zip(before[cache], after[cache])) for cache in CACHES}})
print("BUILT", sorted((r.backend, r.is_deferred) for r in runners))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=900)

    assert cache_types == {"transformers.cache_utils.DynamicCache", "transformers.cache_utils.StaticCache"}
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    same, built = done.stdout.splitlines()[-2:]
    assert same == "SAME {'dynamic': True, 'static': True}"
    assert built == f"BUILT {[('inductor', False)] * len(saved['graphs'])}"
