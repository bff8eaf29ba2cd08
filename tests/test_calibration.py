"""The gain model's calibration: measured once per machine, cached privately, carried in every profile."""

import json
import logging
import math
import stat
from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from aitune.suggest.gain import FALLBACK, Calibration  # noqa: E402
from aitune.torch import calibration  # noqa: E402
from aitune.torch.backends.onnx_export import HAND_BUILT_IR_VERSION  # noqa: E402
from aitune.torch.performance.environment import environment, profile_environment  # noqa: E402
from aitune.torch.tuning import calibrate  # noqa: E402

MEASURED = Calibration(5.0, 0.5, 20.0, {"conv": 1.4, "matmul": 1.1}, "calibrated here", device="cpu:a test CPU")


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AITUNE_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def quiet(monkeypatch):
    """A quiet machine, and a calibration that counts its runs instead of timing anything."""
    runs = []
    monkeypatch.setattr(calibration, "_loaded", lambda: False)
    return runs


def counted(runs, measured=MEASURED):
    """A measuring function for `ensure_calibration` that counts its runs instead of timing anything."""
    return lambda device: runs.append(device) or measured


def test_a_real_calibration_gives_finite_figures_in_the_gain_models_ranges():
    measured = calibrate.calibrate()

    assert Calibration.from_dict(measured.to_dict()) == measured
    assert measured.device == calibration.device_id(torch.device("cpu")) and measured.device.startswith("cpu:")
    figures = (measured.eager_op_us, measured.tuned_op_us, measured.tuned_call_us, measured.stateful_call_us)
    assert all(math.isfinite(v) and v > 0 for v in figures)  # dynamo's per-call work included
    assert set(measured.arithmetic) == {"conv", "matmul", "attention", "recurrent", "elementwise_norm"}
    assert all(1.0 <= v <= calibrate.MAX_ARITHMETIC_SPEEDUP for v in measured.arithmetic.values())
    assert measured.source.startswith("calibrated ")


def test_the_first_call_measures_and_caches_in_a_private_folder_the_next_reads_the_cache(quiet, private_cache):
    first, second = calibration.ensure_calibration(counted(quiet)), calibration.ensure_calibration(counted(quiet))

    assert first == second == MEASURED
    assert len(quiet) == 1
    folder = private_cache / "calibration"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert [path.name for path in folder.iterdir()] == [calibration.cache_file().name]


def test_a_calibration_cached_by_an_earlier_method_is_measured_again(quiet, monkeypatch, private_cache):
    method = calibration.METHOD
    monkeypatch.setattr(calibration, "METHOD", method - 1)
    calibration.ensure_calibration(counted(quiet))

    monkeypatch.setattr(calibration, "METHOD", method)
    calibration.ensure_calibration(counted(quiet))

    assert len(quiet) == 2
    assert len(list((private_cache / "calibration").iterdir())) == 2


def test_a_calibration_of_a_loaded_machine_is_measured_again_once_it_is_quiet(quiet, monkeypatch):
    loaded = replace(MEASURED, source="calibrated on a busy day" + calibration.LOADED_SUFFIX)

    def measure(device):
        return quiet.append(device) or (loaded if len(quiet) == 1 else MEASURED)

    monkeypatch.setattr(calibration, "_loaded", lambda: True)
    assert calibration.ensure_calibration(measure) == loaded
    assert calibration.ensure_calibration(measure) == loaded  # still loaded: the cache serves

    monkeypatch.setattr(calibration, "_loaded", lambda: False)

    assert calibration.ensure_calibration(measure) == MEASURED
    assert len(quiet) == 2


@pytest.mark.parametrize("content", ["{not json", json.dumps({"eager_op_us": -1}), " " * 20_000])
def test_a_cache_file_that_is_not_a_calibration_is_ignored(content):
    path = calibration.cache_file()
    path.parent.mkdir(parents=True)
    path.write_text(content)

    assert calibration.cached_calibration() is None


def test_profiles_carry_the_cached_calibration_and_none_before_there_is_one(quiet):
    assert "gain_calibration" not in profile_environment()

    calibration.ensure_calibration(counted(quiet))

    assert profile_environment()["gain_calibration"] == MEASURED.to_dict()
    assert Calibration.from_dict(profile_environment()["gain_calibration"]) != FALLBACK


def test_plans_and_tuning_reports_record_the_environment_without_the_calibration(quiet):
    calibration.ensure_calibration(counted(quiet))

    assert "gain_calibration" not in environment()


def test_the_calibrations_graphs_carry_an_ir_version_older_onnx_runtimes_read():
    # onnx stamps its own newest IR version (14 from onnx 1.23), which ONNX Runtime 1.30 refuses.
    onnx, onnxruntime = pytest.importorskip("onnx"), pytest.importorskip("onnxruntime")
    x, w = torch.randn(2, 4), torch.randn(4, 4)
    chain = calibrate._chain_graph(2)
    product = calibrate._graph("matmul", [onnx.helper.make_node("MatMul", ["x", "w"], ["y"])], x, {"w": w})

    assert chain.ir_version == product.ir_version == min(onnx.IR_VERSION, HAND_BUILT_IR_VERSION)
    probe = calibrate._Probe(torch.device("cpu"), onnxruntime)
    assert torch.allclose(probe.graph_call(product, x)(), x @ w, atol=1e-6)


def test_a_calibration_that_fails_warns_and_leaves_the_gain_model_its_fallback(monkeypatch, caplog):
    def fail(device):
        raise RuntimeError("Unsupported model IR version: 14, max supported IR version: 13")

    monkeypatch.setattr(calibration, "_loaded", lambda: False)

    with caplog.at_level(logging.WARNING, logger="aitune"):
        assert calibration.ensure_calibration(fail) is None

    assert "calibration failed (Unsupported model IR version: 14" in caplog.text
    assert not calibration.cache_file().exists()


def test_each_device_has_its_own_cached_calibration_and_a_cpu_one_is_never_read_for_cuda(quiet, monkeypatch):
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    named = {"cpu": MEASURED.device, "cuda": "cuda:A GPU"}
    monkeypatch.setattr(calibration, "device_id", lambda device: named[device.type])  # no GPU needed to name one
    on_gpu = replace(MEASURED, eager_op_us=9.0, device="cuda:A GPU")

    calibration.ensure_calibration(counted(quiet), cpu)

    assert calibration.cached_calibration(cpu) == MEASURED
    assert calibration.cached_calibration(cuda) is None
    assert calibration.cache_file(cpu) != calibration.cache_file(cuda)
    assert calibration.ensure_calibration(counted(quiet, on_gpu), cuda) == on_gpu
    assert quiet == [cpu, cuda]  # measured once on each device, on that device
    assert calibration.cached_calibration(cpu) == MEASURED and calibration.cached_calibration(cuda) == on_gpu
