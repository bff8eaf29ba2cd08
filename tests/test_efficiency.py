"""Work and efficiency through real captures: FLOPs of known layers counted exactly from the
profiler's recorded shapes, the machine's roofs measured and cached, and every reader of a lite
capture still working."""

from __future__ import annotations

import io
import json
import stat
import time

import pytest
import torch
from rich.console import Console
from torch import nn
from torch.nn import functional
from torch.utils.flop_counter import FlopCounterMode

import aitune.torch
from aitune.cli.render import profile_view
from aitune.compare.diff import compare_profiles
from aitune.report import render_markdown
from aitune.report.efficiency import has_work, region_efficiencies
from aitune.report.validate import validate
from aitune.suggest import suggest
from aitune.torch.peaks import ensure_peaks, measure_peaks, peaks_file


class Attention(nn.Module):
    def forward(self, q: torch.Tensor) -> torch.Tensor:
        return functional.scaled_dot_product_attention(q, q, q)


class Layers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 8)
        self.conv = nn.Conv2d(3, 4, 3, stride=2, padding=1)
        self.attn = Attention()
        self.norm = nn.LayerNorm(8)

    def forward(self, x: torch.Tensor, image: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return self.norm(self.proj(x)).sum() + self.conv(image).sum() + self.attn(q).sum()


INPUTS = (torch.randn(2, 5, 16), torch.randn(1, 3, 9, 9), torch.randn(1, 2, 6, 4))


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    folder = tmp_path_factory.mktemp("capture")
    with torch.no_grad():
        prof = aitune.torch.profile(Layers(), INPUTS, warmup_runs=1, measured_runs=2, trace_file=folder / "t.json")
    return prof


def _flops(doc, path):
    return {run["run_index"]: _work(run, path)["flops"] for run in doc["operator_runs"]}


def _work(run, path):
    return next(share["work"] for share in run["regions"] if share["region_id"] == f"untuned_module:{path}")


def test_linear_conv_and_attention_of_known_shapes_count_their_analytic_flops_exactly(captured):
    doc = captured.data

    assert set(_flops(doc, "proj").values()) == {2 * (2 * 5) * 16 * 8}
    assert set(_flops(doc, "conv").values()) == {2 * 1 * (5 * 5) * (4 * 3 * 3 * 3)}  # 9×9, stride 2, pad 1 → 5×5
    assert set(_flops(doc, "attn").values()) == {2 * (1 * 2) * 6 * 6 * (4 + 4)}


def test_the_counts_agree_with_torchs_own_flop_counter(captured):
    layers, counts = Layers(), {}
    for path, call in (("proj", lambda: layers.proj(INPUTS[0])), ("conv", lambda: layers.conv(INPUTS[1]))):
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            call()
        counts[path] = counter.get_total_flops()

    assert {path: _flops(captured.data, path)[0] for path in counts} == counts


def test_a_layer_without_a_formula_is_uncounted_time_never_zero_work(captured):
    found = {item.region_id: item for item in region_efficiencies(captured.data)}

    norm = found["untuned_module:norm"]

    assert (norm.flops, norm.counted_us) == (0, 0)
    assert norm.uncounted_us > 0 and norm.mostly_uncounted
    assert "aten::layer_norm" in norm.uncounted_operators
    assert "untuned_module:norm: 100.0% of its operator time is uncounted" in render_markdown(captured.data)


def test_each_counted_region_has_an_achieved_rate_and_a_place_under_the_measured_roofs(captured):
    doc = captured.data

    proj = {item.region_id: item for item in region_efficiencies(doc)}["untuned_module:proj"]

    assert set(doc["environment"]["machine_peaks"]) == {"cuda", "cpu"} if torch.cuda.is_available() else {"cpu"}
    assert proj.flops_per_s > 0 and proj.intensity > 0
    assert proj.fraction_of_roof is not None and proj.fraction_of_roof > 0
    assert proj.bound in ("compute", "memory")
    assert validate(doc) == []


def test_the_saved_trace_re_analysed_gives_the_same_work(captured):
    again = aitune.torch.analyze_trace(captured.trace_file).data

    assert [run["regions"] for run in again["operator_runs"]] == [
        run["regions"] for run in captured.data["operator_runs"]
    ]


def test_suggest_gives_a_counted_target_its_headroom_and_caps_its_gain_near_the_roof(captured):
    doc = captured.data
    proj = {item.region_id: item for item in region_efficiencies(doc)}["untuned_module:proj"]
    # the same profile on a machine whose roofs this work nearly reaches: 95% of the roof
    near = json.loads(json.dumps(doc))
    for roof in near["environment"]["machine_peaks"].values():
        roof["gemm_flops_per_s"] = {
            name: rate * proj.fraction_of_roof / 0.95 for name, rate in roof["gemm_flops_per_s"].items()
        }
        roof["copy_bytes_per_s"] *= proj.fraction_of_roof / 0.95

    far_target = next(t for t in suggest(doc).targets if t.path == "proj")
    near_target = next(t for t in suggest(near).targets if t.path == "proj")

    assert near_target.fraction_of_roof == pytest.approx(0.95)
    assert "NEAR_ROOF" in [reason.code for reason in near_target.reasons]
    assert near_target.predicted_region_speedup <= far_target.predicted_region_speedup


def test_a_lite_capture_has_no_work_and_every_reader_still_works():
    with torch.no_grad():
        lite = aitune.torch.profile(Layers(), INPUTS, warmup_runs=1, measured_runs=2, mode="lite").data

    assert not has_work(lite) and region_efficiencies(lite) == []
    assert "machine_peaks" not in lite["environment"]
    assert "Work and Efficiency" not in render_markdown(lite)
    assert suggest(lite).targets
    assert compare_profiles(lite, lite).run_time.ratio == 1.0
    assert validate(lite) == []


def test_the_calibrated_gemm_peak_is_within_what_a_short_torch_mm_benchmark_gives():
    a, b = torch.randn(512, 512), torch.randn(512, 512)
    torch.mm(a, b)  # the first call sets up the kernel
    rates, peaks = [], []
    for _ in range(3):  # interleaved, so that a load that comes and goes meets both
        for _ in range(10):
            start = time.perf_counter()
            torch.mm(a, b)
            rates.append(2 * 512**3 / (time.perf_counter() - start))
        peaks.append(measure_peaks("cpu")["gemm_flops_per_s"]["float32"])

    # each side's best call, which a loaded machine's preemptions spare most (a mean they do not)
    assert max(rates) / 4 <= max(peaks) <= max(rates) * 4


def test_the_peaks_are_measured_once_and_cached_privately(tmp_path, monkeypatch):
    monkeypatch.setenv("AITUNE_CACHE_DIR", str(tmp_path))

    first = ensure_peaks()
    second = ensure_peaks()

    assert first == second
    assert stat.S_IMODE(peaks_file("cpu").parent.stat().st_mode) == 0o700
    assert json.loads(peaks_file("cpu").read_text())["copy_bytes_per_s"] == first["cpu"]["copy_bytes_per_s"]


def test_the_terminal_report_lists_flops_achieved_rate_and_percent_of_roof(captured):
    console = Console(file=io.StringIO(), width=200)

    console.print(profile_view(captured.data))
    text = console.file.getvalue()

    assert "Work and efficiency" in text
    assert "untuned_module:proj" in text and "2.56 kFLOP" in text
    assert "(mostly)" in text  # the norm: its time has no formula
