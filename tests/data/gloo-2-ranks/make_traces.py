"""Record the Chrome traces of a 2-rank gloo run with plain torch.profiler, one per rank, next to this script.

Run ``OMP_NUM_THREADS=1 python tests/data/gloo-2-ranks/make_traces.py`` from the repository root to
regenerate ``rank0.trace.json.gz`` and ``rank1.trace.json.gz`` (or pass another folder, as
`tests/test_communication.py` does with a temporary one). Each rank measures `RUNS` runs, named the way aitune's
capture names them (`aitune.markers`); in each, region ``untuned_module:layer`` does a small matmul,
an ``all_reduce``, a ``broadcast`` and a ``send`` (rank 0) / ``recv`` (rank 1) of `ELEMENTS` float32
values, and one more ``all_reduce`` runs after the region, in the residual. ``record_shapes=True``
so gloo's spans carry their tensors' sizes.
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.profiler import ProfilerActivity, profile, record_function

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent.parent))

from aitune.markers import region_span_name, run_span_name  # noqa: E402

WORLD_SIZE = 2
RUNS = 2
ELEMENTS = 256
REGION = "untuned_module:layer"
COLLECTIVES_IN_REGION = 3  # all_reduce, broadcast, send or recv
COLLECTIVES_OUTSIDE = 1  # all_reduce


def record(out: Path) -> list[Path]:
    """Run the 2 ranks (gloo, CPU) and write ``out/rank<r>.trace.json.gz``; returns their paths."""
    with socket.socket() as probe:  # a free port for the rendezvous
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    out.mkdir(parents=True, exist_ok=True)
    mp.spawn(_rank, args=(port, str(out)), nprocs=WORLD_SIZE, join=True)
    return [out / f"rank{rank}.trace.json.gz" for rank in range(WORLD_SIZE)]


def _rank(rank: int, port: int, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD_SIZE)
    try:
        values, weight = torch.ones(ELEMENTS), torch.eye(16)
        _layer(rank, values, weight)  # the first calls connect the ranks: keep them out of the trace
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            for run in range(RUNS):
                with record_function(run_span_name(run)):
                    with record_function(region_span_name(REGION)):
                        _layer(rank, values, weight)
                    dist.all_reduce(values)
        plain = Path(out) / f"rank{rank}.trace.json"
        prof.export_chrome_trace(str(plain))
        trace = json.loads(plain.read_text())
        trace["host_name"] = "sample"  # as in sample_traces/: the recording machine's name stays out of the files
        (Path(out) / f"rank{rank}.trace.json.gz").write_bytes(gzip.compress(json.dumps(trace).encode(), mtime=0))
        plain.unlink()
    finally:
        dist.destroy_process_group()


def _layer(rank: int, values: torch.Tensor, weight: torch.Tensor) -> None:
    """The region's work: a little compute, two collectives and a point-to-point transfer."""
    weight @ weight
    dist.all_reduce(values)
    dist.broadcast(values, src=0)
    if rank == 0:
        dist.send(values, dst=1)
    else:
        dist.recv(values, src=0)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    for path in record(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE):
        print(path.name, path.stat().st_size, "bytes")
