"""The GPU check script's CPU dry run: every step runs, and the results are written."""

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_gpu_check_dry_run_passes_every_step_and_writes_its_results(tmp_path):
    done = subprocess.run(
        [str(ROOT / "scripts" / "gpu_check.sh"), "--dry-run", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads((tmp_path / "gpu_check.json").read_text())
    assert results["dry_run"] is True and results["ok"] is True
    assert list(results["steps"]) == ["gpu_tests", "profile_examples", "tune_backends", "capture_overhead"]
    assert {row["backend"] for row in results["steps"]["tune_backends"]["candidates"]} == {"inductor", "onnxruntime"}
    assert "# GPU check" in (tmp_path / "gpu_check.md").read_text()
