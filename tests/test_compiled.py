"""Modules the user already compiled with ``torch.compile`` (real compiles, backend "eager"): one region, not walked."""

import torch
from apps import compiled_app
from cli_helpers import APPS
from torch._dynamo.utils import counters

import aitune.torch as ait
from aitune.report import validate
from aitune.torch.performance.script import capture_script

APP = APPS / "compiled_app.py"


def graph_breaks() -> int:
    return sum(counters["graph_break"].values())


def test_a_compiled_module_is_one_region_of_its_own_kind_and_nothing_inside_it_is_hooked():
    outputs = []
    plain = compiled_app.infer(compiled_app.x)  # compiles here, before anything is hooked
    breaks, graphs = graph_breaks(), counters["stats"]["unique_graphs"]

    prof = ait.profile(compiled_app.pipe, compiled_app.x, lambda x: outputs.append(compiled_app.infer(x)), 1, 2)

    regions = {meta["id"]: meta for meta in prof.data["regions"]}
    assert list(regions) == ["untuned_module:encoder", "untuned_module:encoder.inner", "compiled_module:decoder"]
    assert regions["compiled_module:decoder"]["kind"] == "compiled_module"
    assert regions["compiled_module:decoder"]["module_type"] == "apps.compiled_app.Block"  # the module it compiled
    assert [w["code"] for w in prof.data["warnings"] if w["code"].startswith("COMPILED")] == [
        "COMPILED_MODULE_NOT_WALKED"
    ]
    assert validate(prof.data) == []
    assert (graph_breaks(), counters["stats"]["unique_graphs"]) == (breaks, graphs)  # no hook broke or rebuilt it
    warmups = prof.data["warmup"]["performed"]
    assert all(torch.equal(plain, out) for out in outputs)
    assert len(outputs) == warmups + 2 + 1  # the warmups, 2 measured runs, 1 operator run


def test_a_compiled_root_is_one_region_named_by_its_type():
    model = torch.compile(compiled_app.Block(), backend="eager")
    x = compiled_app.x
    model(x)

    prof = ait.profile(model, x, warmup_runs=0, measured_runs=1)

    assert [r["region_id"] for r in prof.data["runs"][0]["regions"]] == ["compiled_module:Block"]


def test_script_mode_names_a_compiled_module_by_its_kind_and_warns(capsys):
    capture = capture_script(APP)

    doc = capture.profiles[0].data
    kinds = {meta["id"]: meta["kind"] for meta in doc["regions"]}
    assert kinds == {"untuned_module:pipe.encoder": "untuned_module", "compiled_module:pipe.decoder": "compiled_module"}
    assert "COMPILED_MODULE_NOT_WALKED" in [w["code"] for w in doc["warnings"]]
    assert capsys.readouterr().out.startswith("sum ")
