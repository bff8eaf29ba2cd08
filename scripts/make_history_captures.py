"""Record the captures `tests/test_history_check.py` judges: 30 of an unchanged workload and, at their middle, one
whose denoiser waits 50% longer, all on this machine, into tests/data/history-captures/.

    .venv/bin/python scripts/make_history_captures.py [--out tests/data/history-captures]

Why recorded rather than captured by the test: the workload waits for known wall time in each region, as a
region bound by a device or by I/O does, so what its captures measure besides that is the machine's scheduling
(how late a woken thread runs again). While other jobs load the machine that stretches every run of a
capture, its fastest included, by as much as the load of that moment: on this 2-core machine beside three
busy loops an unchanged 10 ms region took 10 to 31 ms from one capture to the next. A test that captures
as it runs therefore judged the load of its minute (and failed about one run in four while the machine was
busy), not the gate. Recorded once, the gate's verdicts on these real captures are the same in every run;
record them again when the capture's document changes (run on a machine as quiet as a CI runner's).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aitune.torch as ait  # noqa: E402
from aitune.report.io import dumps, gzipped, write_atomic  # noqa: E402

UNCHANGED_RUNS = 30
LITE = {"warmup_runs": 1, "measured_runs": 7, "mode": "lite"}
SLOWER_DENOISER_MS = 45.0
SLOWER = "slower.profile.json.gz"


class Waiting(nn.Module):
    """Waits ``ms`` milliseconds, then applies a small real linear layer."""

    def __init__(self, ms: float) -> None:
        super().__init__()
        self.ms = ms
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(self.ms / 1000)
        return self.linear(x)


class SmallPipeline:
    """10 ms encoder, 5 ms of glue, 30 ms denoiser."""

    def __init__(self, denoiser_ms: float = 30.0) -> None:
        torch.manual_seed(0)
        self.encoder = Waiting(10)
        self.denoiser = Waiting(denoiser_ms)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x = self.encoder(x)
        time.sleep(0.005)
        return self.denoiser(x)


def capture(pipeline: SmallPipeline) -> dict:
    return ait.profile(pipeline, torch.ones(1, 4), obj_name="pipe", **LITE).data


def unchanged_name(index: int) -> str:
    return f"unchanged-{index:02d}.profile.json.gz"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "history-captures")
    out = parser.parse_args().out
    # The planted regression is captured at the middle, so that drift of the load reaches both kinds alike.
    unchanged = [capture(SmallPipeline()) for _ in range(UNCHANGED_RUNS // 2)]
    slower = capture(SmallPipeline(denoiser_ms=SLOWER_DENOISER_MS))
    unchanged += [capture(SmallPipeline()) for _ in range(UNCHANGED_RUNS - len(unchanged))]
    for index, document in enumerate(unchanged):
        write_atomic(out / unchanged_name(index), gzipped(dumps(document)))
    write_atomic(out / SLOWER, gzipped(dumps(slower)))
    print(f"wrote {UNCHANGED_RUNS + 1} captures to {out}")


if __name__ == "__main__":
    main()
