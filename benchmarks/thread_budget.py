"""ONNX Runtime on torch's threads against every core: a small GRU, timed in turns with eager.

The issue this answers: ORT's session defaults (every core) ran a GRU encoder at 44–56 ms a call
against 0.9 ms with one thread (eager 2.3 ms). This builds the same GRU with `OnnxRuntimeBackend`
twice — once on torch's thread count (aitune's default now), once on every core — and prints, median
of interleaved rounds, each one's time and its speedup over eager, with the thread counts each session
reports. No figure is asserted; run it on a quiet machine.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/thread_budget.py [--rounds 30]
"""

from __future__ import annotations

import argparse
import os
import platform

import torch
from torch import nn

import aitune
from aitune.torch.backends import BuildContext, OnnxRuntimeBackend
from aitune.torch.graphs.graph_spec import Sample
from aitune.torch.tuning.decision import paired_speedup
from aitune.torch.tuning.measure import MeasureConfig, measure_interleaved


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(64, 128, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gru(x)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    rounds = parser.parse_args().rounds
    torch.manual_seed(0)
    module, x = Encoder().eval(), torch.randn(1, 20, 64)
    with torch.no_grad():
        context = BuildContext(module, module.forward, [Sample((x,), {})], [module(x)], torch.device("cpu"))
    builds = {
        f"torch's ({torch.get_num_threads()})": OnnxRuntimeBackend().build(context),
        f"every core ({os.cpu_count()})": OnnxRuntimeBackend(intra_op_threads=os.cpu_count()).build(context),
    }
    config = MeasureConfig(warmup=3, min_repeats=rounds, max_repeats=rounds, max_seconds=600)
    calls = [lambda: module(x)] + [lambda built=built: built.run(x) for built in builds.values()]
    eager, *candidates = measure_interleaved(calls, config, torch.device("cpu"))
    print(f"aitune {aitune.__version__}, torch {torch.__version__}, {platform.processor() or platform.machine()}")
    print(f"eager: {eager.median_us:.1f} µs a call (cv {eager.cv:.2f})")
    for (label, built), latency in zip(builds.items(), candidates, strict=True):
        interval = paired_speedup(eager.times_us, latency.times_us)
        threads = (built.details["intra_op_threads"], built.details["inter_op_threads"])
        print(f"ORT on {label}: {latency.median_us:.1f} µs, speedup {interval.text()}, session threads {threads}")


if __name__ == "__main__":
    main()
