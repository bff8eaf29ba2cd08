"""Every module path: children of ``nn.Sequential``, ``nn.ModuleList`` and ``nn.ModuleDict`` (``0``, ``layers.3``,
``blocks.1.attn``) are module paths in suggest, ``--targets``, ``wrap``, plans, compare and the viewer, by one rule.

A plain ``nn.Sequential`` conv net (the zoo's ``sequential_convnet``, `tests/apps/sequential_app.py`) goes
through ``aitune-profile tune`` and through ``aitune.torch.optimize`` with ONNX Runtime under first-wins, so a
candidate wins by passing the gate, not by a timing on a shared machine.
"""

from __future__ import annotations

import json

import pytest
import sequential_app
import torch
from cli_helpers import APPS, run_cli
from torch import nn

from aitune import compare
from aitune.errors import TuningError
from aitune.markers import MAX_MODULE_PATH_CHARS, MODULE_PATH_PATTERN, is_module_path
from aitune.report import load
from aitune.suggest import suggest
from aitune.torch import LoopConfig, optimize
from aitune.torch.tuning.paths import module_at, wrap
from aitune.torch.tuning.plan_schema import plan_schema
from aitune.torch.tuning.strategies import named_strategy
from aitune.torch.tuning.wrapper import Module
from aitune.viewer.sources import Loaded
from aitune.viewer.store import ProfileStore

ORT_FIRST_WINS = named_strategy("first-wins", ["onnxruntime"])
FAST = {"warmup_runs": 1, "measured_runs": 3, "record_calls": 1, "verification": None}
FAST_FLAGS = ["--warmup", "1", "--runs", "3", "--record", "1", "--strategy", "first-wins", "--no-verify"]


class Containers(nn.Module):
    """Every container torch names children by index or key, nested: ``layers.1``, ``blocks.0.attn``, ``heads.text``."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))
        self.blocks = nn.ModuleList([nn.ModuleDict({"attn": nn.Linear(4, 4)}) for _ in range(2)])
        self.heads = nn.ModuleDict({"text": nn.Linear(4, 2)})


def test_every_name_torch_gives_a_container_child_is_a_module_path_that_wrap_finds():
    model = Containers()

    names = [name for name, _ in model.named_modules() if name]

    assert {"layers.0", "layers.2", "blocks.1", "blocks.1.attn", "heads.text"} <= set(names)
    assert all(is_module_path(name) for name in names)
    assert all(module_at(model, name) is model.get_submodule(name) for name in names)


@pytest.mark.parametrize(
    "path",
    ["layers..0", ".0", "0.", "__class__", "layers.__dict__", "layers.-1", "layers.1234567", "x:y", "a" * 129],
)
def test_a_path_outside_the_rule_is_refused_by_wrap_in_one_sentence_and_nothing_is_wrapped(path):
    model = Containers()

    with pytest.raises(TuningError, match="is not a module path; write it as the profile does"):
        wrap(model, ["layers.0", path])

    assert not is_module_path(path)
    assert not any(isinstance(module, Module) for module in model.modules())


def test_paths_are_bounded_in_parts_and_length():
    assert is_module_path(".".join(["0"] * 32)) and not is_module_path(".".join(["0"] * 33))
    assert not is_module_path(".".join(["a" * 100] * 6))  # six parts, each in the rule, but over the length bound
    assert len(".".join(["a" * 100] * 6)) > MAX_MODULE_PATH_CHARS


def test_plans_check_their_paths_by_the_same_rule():
    path = plan_schema()["$defs"]["Region"]["properties"]["path"]

    assert path["pattern"] == f"^{MODULE_PATH_PATTERN}$"
    assert path["maxLength"] == MAX_MODULE_PATH_CHARS


@pytest.fixture(scope="module")
def tuned_folder(tmp_path_factory):
    """``aitune-profile tune`` of the plain Sequential with ``--obj model --targets 0,2``: its folder."""
    out = tmp_path_factory.mktemp("sequential") / "tuned"
    target = f"{APPS / 'sequential_app.py'}:infer"
    options = ["--input", "x", "--obj", "model", *FAST_FLAGS, "--backends", "onnxruntime"]

    run_cli("tune", target, *options, "--targets", "0,2", "--out", str(out), check=True)

    return out, target, options


@pytest.mark.slow
def test_tune_on_a_plain_sequential_suggests_its_children_and_tunes_them_by_index(tuned_folder):
    out, _, _ = tuned_folder

    suggested = json.loads((out / "suggestions.json").read_text())
    plan = json.loads((out / "plan.json").read_text())
    after = load(out / "after" / "profile.json")

    assert suggested["targets"] and all(target["path"].isdigit() for target in suggested["targets"])
    assert [region["path"] for region in plan["regions"]] == ["0", "2"]
    states = {region.id: region.wrapper_state for region in after.regions}
    assert states["aot_module:0"] == states["aot_module:2"] == "tuned"


@pytest.mark.slow
def test_compare_and_the_viewer_line_up_a_tuned_child_with_its_untuned_self(tuned_folder):
    out, _, _ = tuned_folder
    before, after = load(out / "before" / "profile.json"), load(out / "after" / "profile.json")

    diff = compare.compare_profiles(before, after)
    store = ProfileStore(before=Loaded("before.json", before), after=Loaded("after.json", after))
    rows = store.region_table("cpu")

    ids = {change.path: (change.before_id, change.after_id) for change in diff.regions}
    assert ids["2"] == ("untuned_module:2", "aot_module:2")
    assert set(rows.loc[rows["path"] == "2", "side"]) == {"before", "after"}
    assert [target.path for target in suggest(before).recommended()] == json.loads(
        (out / "suggestions.json").read_text()
    )["recommended"]


@pytest.mark.slow
def test_a_plan_of_sequential_children_replays_in_a_fresh_process(tuned_folder, tmp_path):
    out, target, options = tuned_folder

    again = run_cli("tune", target, *options, "--plan", str(out / "plan.json"), "--out", str(tmp_path / "replayed"))

    assert again.returncode == 0, again.stderr
    replayed = json.loads((tmp_path / "replayed" / "plan.json").read_text())
    assert [region["path"] for region in replayed["regions"]] == ["0", "2"]


@pytest.mark.slow
def test_the_loop_api_tunes_a_plain_sequential_child_by_index_and_suggest_names_the_children_so():
    model, images, classify = sequential_app.sequential_convnet.build()
    eager = classify(images)

    result = optimize(model, images, classify, config=LoopConfig(targets=("2",), strategy=ORT_FIRST_WINS, **FAST))
    try:
        tuned_child, tuned = model[2], classify(images)
    finally:
        result.restore()

    # Whether a child is *worth* tuning is the gain model's call on this machine; that it is named by index is not.
    suggested = {target.path for target in suggest(result.before).targets}
    assert {"0", "2", "4"} <= suggested and all(path.isdigit() for path in suggested)
    assert [(gain.path, gain.winner) for gain in result.gains] == [("2", "onnxruntime")]
    assert isinstance(tuned_child, Module) and not isinstance(model[2], Module)
    assert torch.allclose(tuned, eager, rtol=1e-3, atol=1e-4)
