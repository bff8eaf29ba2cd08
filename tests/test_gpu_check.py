"""The GPU check script's CPU dry run: every step runs, and the results are written."""

import importlib.util
import json
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.torch  # the script imports torch


def gpu_check_module():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_check_runs_every_file_that_holds_gpu_tests():
    marked = re.compile(r"^(@pytest\.mark\.gpu\b|pytestmark = .*pytest\.mark\.gpu\b)", re.MULTILINE)
    holding = sorted(
        str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("test_*.py") if marked.search(path.read_text())
    )

    assert sorted(gpu_check_module().GPU_TEST_FILES) == holding


@pytest.mark.slow
def test_gpu_check_dry_run_passes_every_step_and_writes_its_results(tmp_path):
    done = subprocess.run(
        [str(ROOT / "scripts" / "gpu_check.sh"), "--dry-run", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
    )

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads((tmp_path / "gpu_check.json").read_text())
    assert results["dry_run"] is True and results["ok"] is True
    steps = results["steps"]
    assert list(steps) == ["gpu_tests", "profile_examples", "tune_backends", "closed_loop", "capture_overhead"]
    candidates = {row["backend"]: row["status"] for row in steps["tune_backends"]["candidates"]}
    assert candidates.keys() == {"inductor", "onnxruntime", "tensorrt"} and candidates["tensorrt"] == "skipped"
    assert "tensorrt" in steps["tune_backends"]["skipped"]
    assert "skipped tensorrt: TensorRT needs a CUDA device" in done.stdout
    headline = [row["label"] for row in steps["profile_examples"]["pipeline_app"]["headline"]]
    # The unet holds most of the pipeline's CPU time: at 90% or more the headline shows it as its
    # blocks and its self row, below that as one row; which one is up to the machine.
    assert headline[-1] == "(residual)"
    assert "untuned_module:unet" in headline or "untuned_module:unet (self)" in headline
    loop = steps["closed_loop"]
    assert loop["recommended"][0] == "unet"
    assert [(region["path"], region["winner"]) for region in loop["regions"]] == [("unet", "onnxruntime")]
    assert {"compare.json", "plan.json", "before/profile.json", "after/profile.json"} <= set(loop["files"])
    summary = (tmp_path / "gpu_check.md").read_text()
    assert "# GPU check" in summary and "Headline of pipeline_app" in summary
    assert sorted(path.name for path in tmp_path.iterdir()) == ["gpu_check.json", "gpu_check.log", "gpu_check.md"]
