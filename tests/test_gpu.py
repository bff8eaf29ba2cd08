"""Device-time attribution on a real GPU: run by scripts/gpu_check.sh, skipped where there is no CUDA."""

import pytest
import torch
from torch import nn

import aitune.torch as ait
from aitune.report import validate

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


class Heavy(nn.Module):
    def __init__(self, width: int = 2048, depth: int = 4):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Linear(width, width) for _ in range(depth)])

    def forward(self, x):
        return self.layers(x)


class GpuPipe:
    def __init__(self):
        self.encoder = Heavy().cuda()
        self.decoder = Heavy().cuda()

    def __call__(self, x):
        x = self.encoder(x)
        x = x * 0.5 + 1  # a little device work between modules: device residual
        return self.decoder(x)


def test_cuda_activity_is_chosen_and_regions_get_device_time_from_their_kernels():
    prof = ait.profile(GpuPipe(), torch.randn(256, 2048, device="cuda"), warmup_runs=2, measured_runs=3)

    assert "CUDA" in prof.data["profiler"]["activities"]
    assert validate(prof.data) == []
    for run in prof.data["runs"]:
        shares = {r["region_id"]: r["device_time_fraction"] for r in run["regions"]}
        assert shares["untuned_module:encoder"] == pytest.approx(0.5, abs=0.1)
        assert shares["untuned_module:decoder"] == pytest.approx(0.5, abs=0.1)
        assert 0 < run["residual"]["device_time_fraction"] < 0.05
        assert all(r["device_busy_time_us"] <= r["device_time_us"] + 1e-6 for r in run["regions"])


def test_runs_are_synchronised_so_wall_time_covers_the_device_work():
    prof = ait.profile(GpuPipe(), torch.randn(256, 2048, device="cuda"), warmup_runs=1, measured_runs=3)

    for run in prof.data["runs"]:
        assert run["timing"]["wall_time_us"] >= run["timing"]["device_time_us"]


def test_the_operator_table_has_kernel_rows():
    prof = ait.profile(GpuPipe(), torch.randn(64, 2048, device="cuda"), warmup_runs=1, measured_runs=2)

    rows = prof.data["profiler"]["key_averages"]["device_time_total"]
    assert any(row["device_type"] == "CUDA" for row in rows)
