"""The model zoo (benchmarks/zoo): every app builds and runs, and suggest's predictions on it are sound and steady."""

import math
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("diffusers")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from zoo import APPS  # noqa: E402

import aitune.torch  # noqa: E402
from aitune.suggest import FALLBACK, suggest  # noqa: E402


@pytest.fixture(autouse=True)
def no_machine_calibration(tmp_path, monkeypatch):
    """An empty cache: captures carry no calibration, so suggest uses the fallback table, the same everywhere."""
    monkeypatch.setenv("AITUNE_CACHE_DIR", str(tmp_path))


def call(function, input_data):
    if input_data is None:  # the app feeds itself (a service's rotating inputs)
        return function()
    return function(**input_data) if isinstance(input_data, dict) else function(input_data)


@pytest.mark.parametrize("name", list(APPS))
def test_each_app_builds_and_gives_the_same_output_on_every_turn_of_its_calls(name):
    obj, input_data, function = APPS[name].build()
    entry = function if function is not None else obj
    cycle = getattr(APPS[name], "CYCLE", 1)  # calls after which a service's rotating inputs repeat

    outputs = [call(entry, input_data) for _ in range(cycle + 1)]

    assert all(isinstance(output, torch.Tensor) and output.numel() > 0 for output in outputs)
    assert torch.equal(outputs[0], outputs[cycle])


def test_two_builds_have_the_same_weights():
    one, _, _ = APPS["bert_classifier"].build()
    other, _, _ = APPS["bert_classifier"].build()

    assert all(torch.equal(a, b) for a, b in zip(one.state_dict().values(), other.state_dict().values(), strict=True))


@pytest.mark.parametrize("name", ["bert_classifier", "gpt2_generate"])
def test_two_captures_give_a_finite_prediction_of_at_least_1_and_the_same_top_three_targets(name):
    """The top three: what suggest recommends (``recommended(3)``, the targets the loop would tune)."""
    obj, input_data, function = APPS[name].build()

    found = [
        suggest(aitune.torch.profile(obj, input_data, function, warmup_runs=2, measured_runs=5).data) for _ in range(2)
    ]

    for suggestions in found:
        assert suggestions.calibration == FALLBACK
        predicted, _ = suggestions.combined()
        assert math.isfinite(predicted) and predicted >= 1.0
        assert all(math.isfinite(t.predicted_speedup) and t.predicted_speedup >= 1.0 for t in suggestions.targets)
    assert [t.path for t in found[0].recommended(3)] == [t.path for t in found[1].recommended(3)]
