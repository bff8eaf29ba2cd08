"""A tensor-parallel MLP stack split over the ranks of a ``torch.distributed`` job: the bundled distributed example.

Each block is Megatron-style: a column-parallel up projection (each rank holds a slice of the
hidden units, no communication), GELU, then a row-parallel down projection whose partial sums are
added across ranks with ``dist.all_reduce``. The shards are cut from one seeded full-size model, so
every world size computes the same output. Pure ``torch.distributed``; gloo on CPU.

    torchrun --nproc-per-node 2 -m aitune.cli capture examples/tensor_parallel_app.py:infer --out tp

``AITUNE_EXAMPLE_SLOW_RANK=1`` makes rank 1 a straggler: it sleeps ``AITUNE_EXAMPLE_SLOW_MS``
(default 5) milliseconds inside ``blocks.0.up`` on every call, and the other ranks wait for it in
the ``all_reduce`` of ``blocks.0.down``.
"""

from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional

WIDTH = 256
HIDDEN = 1024
DEPTH = 2

if not dist.is_initialized():  # the app owns its group, as most sharded apps do: aitune uses it
    dist.init_process_group("gloo")
RANK, WORLD_SIZE = dist.get_rank(), dist.get_world_size()
SLOW_RANK = int(os.environ.get("AITUNE_EXAMPLE_SLOW_RANK", "-1"))
SLOW_S = float(os.environ.get("AITUNE_EXAMPLE_SLOW_MS", "5")) / 1000


class ColumnParallelLinear(nn.Module):
    """This rank's slice of the output features of a full linear layer; no communication."""

    def __init__(self, full: nn.Linear, straggle: bool = False) -> None:
        super().__init__()
        rows = full.out_features // WORLD_SIZE
        self.weight = nn.Parameter(full.weight.detach()[RANK * rows : (RANK + 1) * rows].clone())
        self.bias = nn.Parameter(full.bias.detach()[RANK * rows : (RANK + 1) * rows].clone())
        self.straggle = straggle and RANK == SLOW_RANK

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.straggle:
            time.sleep(SLOW_S)
        return functional.linear(x, self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """This rank's slice of the input features of a full linear layer; partial outputs summed with all_reduce."""

    def __init__(self, full: nn.Linear) -> None:
        super().__init__()
        columns = full.in_features // WORLD_SIZE
        self.weight = nn.Parameter(full.weight.detach()[:, RANK * columns : (RANK + 1) * columns].clone())
        self.bias = nn.Parameter(full.bias.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        partial = functional.linear(x, self.weight)
        dist.all_reduce(partial)
        return partial + self.bias  # added once, after the sum, as the unsharded layer adds it


class ParallelBlock(nn.Module):
    """Pre-norm residual MLP block: norm, column-parallel up, GELU, row-parallel down."""

    def __init__(self, straggle: bool = False) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.up = ColumnParallelLinear(nn.Linear(WIDTH, HIDDEN), straggle)
        self.down = RowParallelLinear(nn.Linear(HIDDEN, WIDTH))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(functional.gelu(self.up(self.norm(x))))


class TensorParallelMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)  # every rank cuts its shards from the same full-size weights
        self.blocks = nn.ModuleList(ParallelBlock(straggle=index == 0) for index in range(DEPTH))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


model = TensorParallelMLP().eval()
tokens = torch.randn(8, 32, WIDTH, generator=torch.Generator().manual_seed(1))


@torch.no_grad()
def infer() -> torch.Tensor:
    """One forward pass of the sharded stack; every rank returns the same full output."""
    return model(tokens)


if __name__ == "__main__":
    output = infer()
    print(f"rank {RANK}/{WORLD_SIZE}: output sum {output.sum().item():.4f}")
    dist.destroy_process_group()
