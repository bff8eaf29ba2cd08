"""suggest --precision: what bf16 or int8 would bring each target on this machine, and which would likely fail
the task gate. Hand-built regions for the arithmetic; a real profile through suggest and the command line."""

import pytest
from cli_helpers import run_cli
from test_suggest import pipeline, profile

from aitune.cpuinfo import cpu_flags
from aitune.errors import ProfileError
from aitune.report import save
from aitune.suggest import suggest
from aitune.suggest.precision import ARITHMETIC_FACTORS, cpu_lacks, outlook

AMX = frozenset({"avx2", "amx_bf16", "amx_int8"})


def test_a_reduced_precision_speeds_up_the_arithmetic_it_has_factors_for_and_nothing_else():
    arithmetic = {"matmul": 50.0, "copy": 10.0}

    bf16 = outlook("encoder", "bf16", 100.0, arithmetic, {"matmul": 50.0}, flags=AMX)

    saved = 50.0 * (1 - 1 / ARITHMETIC_FACTORS["bf16"]["matmul"])
    assert bf16.predicted_region_speedup == pytest.approx(100.0 / (100.0 - saved))
    assert bf16.refused is None and bf16.risk is None
    assert outlook("conv", "int8", 100.0, {"conv": 90.0}, {"conv": 90.0}, flags=AMX).predicted_region_speedup == 1.0


def test_a_cpu_without_bf16_arithmetic_gets_no_gain_and_the_reason():
    refused = outlook("encoder", "bf16", 100.0, {"matmul": 50.0}, {"matmul": 50.0}, flags=frozenset({"avx2"}))

    assert refused.predicted_region_speedup == 1.0
    assert "neither amx_bf16 nor avx512_bf16" in refused.refused
    assert cpu_lacks("int8", frozenset({"sse4_2"})) is not None and cpu_lacks("int8", AMX) is None


def test_a_softmax_and_normalisation_heavy_region_is_flagged_for_the_task_gate():
    mix = {"matmul": 60.0, "elementwise_norm": 40.0}

    flagged = outlook("attention", "bf16", 100.0, {"matmul": 60.0}, mix, flags=AMX)

    assert flagged.risk.startswith("softmax, normalisation and elementwise operators take 40% of its operator time")


def test_suggest_with_a_precision_gives_every_target_an_outlook_and_the_command_prints_it(tmp_path):
    doc = profile(pipeline)
    path = tmp_path / "profile.json"
    save(doc, path)

    found = suggest(doc, precision="int8")

    assert [item.path for item in found.precision] == [target.path for target in found.targets]
    assert found.to_dict()["precision"][0]["precision"] == "int8"
    assert "precision" not in suggest(doc).to_dict()
    ran = run_cli("suggest", str(path), "--precision", "bf16", check=True)
    lacking = cpu_lacks("bf16", cpu_flags())
    expected = f"bf16 brings nothing here: {lacking}" if lacking else "bf16: unet"
    assert expected in " ".join(ran.stdout.split())


def test_an_unknown_precision_is_refused():
    with pytest.raises(ProfileError, match="unknown precision 'fp8'; choose one of fp32, bf16, int8"):
        suggest(profile(pipeline), precision="fp8")
