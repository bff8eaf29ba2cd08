"""The GPU checks in one go: device-time attribution, tuning backends on CUDA, capture overhead.

    scripts/gpu_check.sh OUT_DIR            # on a machine with CUDA: everything, about 8 minutes on an H200
    scripts/gpu_check.sh --dry-run OUT_DIR  # anywhere: every step on the CPU with small sizes

Writes OUT_DIR/gpu_check.json (every figure) and OUT_DIR/gpu_check.md (the summary), and exits 1
when any check failed, so one device run tells everything. Installs nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "benchmarks")]

import decoder_app  # noqa: E402
import overhead  # noqa: E402
import pipeline_app  # noqa: E402
import tuning_models  # noqa: E402

import aitune.torch as ait  # noqa: E402
from aitune.report import validate  # noqa: E402
from aitune.torch.performance.environment import environment  # noqa: E402

DEVICE_RESIDUAL_LIMIT = 0.05
"""A GPU-bound pipeline keeps almost all device work inside regions."""


class Check:
    """Collects each step's figures and whether it passed; a step that raises fails, the others still run."""

    def __init__(self) -> None:
        self.steps: dict[str, dict[str, Any]] = {}

    def run(self, name: str, step: Callable[[], dict[str, Any]]) -> None:
        start = time.perf_counter()
        try:
            result = step()
        except Exception as error:  # a check script reports every failure instead of stopping at the first
            result = {"ok": False, "error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()}
        result["seconds"] = round(time.perf_counter() - start, 1)
        self.steps[name] = result
        print(f"[{'ok' if result.get('ok') else 'FAILED'}] {name} ({result['seconds']} s)", flush=True)

    @property
    def ok(self) -> bool:
        return all(step.get("ok") for step in self.steps.values())


def gpu_tests(dry_run: bool) -> dict[str, Any]:
    """The tests marked ``gpu``: run them (collect only, in a dry run)."""
    command = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", "tests"]
    if dry_run:
        command.append("--collect-only")
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    tail = done.stdout.strip().splitlines()[-1:] if done.stdout.strip() else []
    return {
        "ok": done.returncode == 0,
        "command": " ".join(command[2:]),
        "summary": tail,
        "output": done.stdout[-4000:],
    }


def profile_examples(device: torch.device, runs: int) -> dict[str, Any]:
    """Profile both bundled examples on ``device``: documents must add up, the pipeline's device residual be small."""
    examples = {
        "pipeline_app": (pipeline_app.pipe.to(device), pipeline_app.infer, _to(pipeline_app.input_data, device)),
        "decoder_app": (decoder_app.model.to(device), decoder_app.infer, _to(decoder_app.input_data, device)),
    }
    results: dict[str, Any] = {"ok": True}
    for name, (obj, function, inputs) in examples.items():
        prof = ait.profile(obj, inputs, function, warmup_runs=2, measured_runs=runs)
        problems = validate(prof.data)
        run = prof.data["runs"][len(prof.data["runs"]) // 2]
        domain = "device" if "device_time_fraction" in run["residual"] else "cpu"
        shares = {r["region_id"]: round(r[f"{domain}_time_fraction"], 4) for r in run["regions"]}
        residual = run["residual"][f"{domain}_time_fraction"]
        entry = {
            "domain": domain,
            "region_shares": shares,
            "residual": round(residual, 4),
            "problems": problems,
            "warnings": [w["code"] for w in prof.data["warnings"]],
            "run_wall_ms": round(run["timing"].get("wall_time_us", 0) / 1000, 3),
        }
        entry["ok"] = not problems and (domain == "cpu" or name != "pipeline_app" or residual < DEVICE_RESIDUAL_LIMIT)
        if device.type == "cuda" and domain != "device":
            entry["ok"], entry["error"] = False, "no device time on a CUDA capture"
        results[name] = entry
        results["ok"] = results["ok"] and entry["ok"]
        print(f"  {name}: {domain} shares {shares}, residual {residual:.4f}", flush=True)
    return results


def tune_backends(device: torch.device, dry_run: bool) -> dict[str, Any]:
    """Every backend on one conv model: built, gated against eager, timed; the candidate table."""
    model = tuning_models.ConvModel(classes=10).eval().to(device)
    batch = torch.randn(2 if dry_run else 16, 3, 64 if dry_run else 224, 64 if dry_run else 224, device=device)
    backends: list[Any] = [ait.InductorBackend(), ait.OnnxRuntimeBackend()]
    if not dry_run:
        backends.append(ait.TensorRTBackend())
    wrapper = ait.Module(model.backbone, name="gpu_check_backbone")
    try:
        wrapper.enable_recording()
        with torch.no_grad():
            model(batch)
        report = wrapper.tune(device=device, strategy=ait.MinLatencyStrategy(backends, margin=0.0), dry_run=True)
    finally:
        wrapper.close()
    graph = report["graphs"][0]
    table = [
        {
            key: candidate[key]
            for key in (
                "backend",
                "status",
                "reason",
                "build_time_s",
                "latency_median_us",
                "speedup_vs_eager",
                "max_abs_error",
                "cosine_similarity",
            )
        }
        for candidate in graph["candidates"]
    ]
    for row in table:
        print(f"  {row['backend']}: {row['status']} {row['speedup_vs_eager']}x {row['reason'] or ''}", flush=True)
    # Built, run and within tolerance is the check; which one is fastest is a figure, not a verdict.
    broken = [row for row in table if (row["reason"] or "").startswith(("build failed", "run failed", "outside"))]
    gated = [row for row in table if row["status"] != "skipped" and row not in broken]
    return {
        "ok": bool(gated) and not broken,
        "eager_latency_us": graph["eager"]["latency_median_us"],
        "candidates": table,
        "winner": graph["winner"],
    }


def capture_overhead(device: torch.device, dry_run: bool) -> dict[str, Any]:
    """benchmarks/overhead.py's two ratios on ``device`` (a token run in a dry run)."""
    options = (
        argparse.Namespace(repeats=1, warmup=1, runs=2) if dry_run else argparse.Namespace(repeats=3, warmup=3, runs=10)
    )
    rows = [
        overhead.measure(
            "pipeline_app",
            pipeline_app.pipe.to(device),
            pipeline_app.infer,
            _to(pipeline_app.input_data, device),
            options,
        ),
        overhead.measure(
            "decoder_app", decoder_app.model.to(device), decoder_app.infer, _to(decoder_app.input_data, device), options
        ),
    ]
    return {"ok": True, "rows": rows}


def _to(inputs: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    return {key: value.to(device) for key, value in inputs.items()}


def summary_markdown(results: dict[str, Any]) -> str:
    env = results["environment"]
    lines = [
        f"# GPU check — {results['date']}",
        "",
        f"Device: {', '.join(env.get('devices', [])) or 'CPU (dry run)'}; torch {env['torch']}, CUDA {env['cuda']}; "
        f"dry run: {results['dry_run']}; result: {'passed' if results['ok'] else 'FAILED'}",
        "",
    ]
    for name, step in results["steps"].items():
        lines.append(f"## {name}: {'ok' if step.get('ok') else 'FAILED'} ({step['seconds']} s)")
        if "error" in step:
            lines.append(f"\n    {step['error']}")
        lines.append("")
        lines.append("```json")
        lines.append(json.dumps({k: v for k, v in step.items() if k not in ("traceback", "output")}, indent=2))
        lines.append("```")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder for gpu_check.json and gpu_check.md")
    parser.add_argument("--dry-run", action="store_true", help="run every step on the CPU with small sizes")
    options = parser.parse_args()
    if not options.dry_run and not torch.cuda.is_available():
        print("gpu_check: no CUDA device here; pass --dry-run to check the script on the CPU.", file=sys.stderr)
        return 2
    device = torch.device("cpu" if options.dry_run else "cuda")
    check = Check()
    check.run("gpu_tests", lambda: gpu_tests(options.dry_run))
    check.run("profile_examples", lambda: profile_examples(device, 2 if options.dry_run else 10))
    check.run("tune_backends", lambda: tune_backends(device, options.dry_run))
    check.run("capture_overhead", lambda: capture_overhead(device, options.dry_run))
    results = {
        "date": time.strftime("%Y-%m-%d"),
        "dry_run": options.dry_run,
        "ok": check.ok,
        "environment": environment(),
        "steps": check.steps,
    }
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / "gpu_check.json").write_text(json.dumps(results, indent=2) + "\n")
    (options.out / "gpu_check.md").write_text(summary_markdown(results))
    print(
        f"wrote {options.out / 'gpu_check.json'} and {options.out / 'gpu_check.md'}: "
        f"{'all checks passed' if check.ok else 'SOME CHECKS FAILED'}"
    )
    return 0 if check.ok else 1


if __name__ == "__main__":
    sys.exit(main())
