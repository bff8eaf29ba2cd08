"""Tune a tensor-parallel toy under torchrun with `aitune.torch.optimize`; each rank writes what it decided.

``python tp_tune.py OUT [PLAN]`` under ``torchrun --nproc-per-node N``: a two-block MLP split over the
ranks (column-parallel ``up``, row-parallel ``down`` whose partial sums meet in ``dist.all_reduce``),
tuned with one backend, ``direct``, that runs a linear shard's ``functional.linear`` straight (so
it skips whatever the module's own forward adds). Rank ``AITUNE_TEST_SLOW_RANK`` sleeps
``AITUNE_TEST_SLOW_MS`` inside ``blocks.0.up``: only there does ``direct`` win, and only for that rank.
``AITUNE_TEST_WRONG_RANK``: ``direct`` computes a wrong answer on that rank (its gate rejects it);
``AITUNE_TEST_KILL_RANK``: that rank dies (SIGKILL) while ``direct`` builds. With ``PLAN``, the plan
is replayed instead of searched. Each rank writes ``OUT/rank<r>.json``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional

from aitune.compare.verification import VerifyConfig
from aitune.errors import AituneError
from aitune.torch.backends import Backend, BuildContext, Built
from aitune.torch.loop import LoopConfig, optimize
from aitune.torch.tuning.measure import MeasureConfig
from aitune.torch.tuning.strategies import MinLatencyStrategy

WIDTH, HIDDEN = 64, 256
dist.init_process_group("gloo")  # the app owns its group, as sharded apps do: aitune tunes on it
RANK, WORLD_SIZE = dist.get_rank(), dist.get_world_size()


def _rank_of(name: str) -> int:
    return int(os.environ.get(name, "-1"))


class ColumnParallelLinear(nn.Module):
    def __init__(self, full: nn.Linear, straggle: bool) -> None:
        super().__init__()
        rows = full.out_features // WORLD_SIZE
        self.weight = nn.Parameter(full.weight.detach()[RANK * rows : (RANK + 1) * rows].clone())
        self.bias = nn.Parameter(full.bias.detach()[RANK * rows : (RANK + 1) * rows].clone())
        self.pause_s = float(os.environ.get("AITUNE_TEST_SLOW_MS", "0")) / 1000 if straggle else 0.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pause_s and _rank_of("AITUNE_TEST_SLOW_RANK") == RANK:
            time.sleep(self.pause_s)
        return functional.linear(x, self.weight, self.bias)


class RowParallelLinear(nn.Module):
    def __init__(self, full: nn.Linear) -> None:
        super().__init__()
        columns = full.in_features // WORLD_SIZE
        self.weight = nn.Parameter(full.weight.detach()[:, RANK * columns : (RANK + 1) * columns].clone())
        self.bias = nn.Parameter(full.bias.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        partial = functional.linear(x, self.weight)
        dist.all_reduce(partial)
        return partial + self.bias


class Block(nn.Module):
    def __init__(self, straggle: bool) -> None:
        super().__init__()
        self.up = ColumnParallelLinear(nn.Linear(WIDTH, HIDDEN), straggle)
        self.down = RowParallelLinear(nn.Linear(HIDDEN, WIDTH))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(functional.gelu(self.up(x)))


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)  # every rank cuts its shards from the same full-size weights
        self.blocks = nn.ModuleList(Block(straggle=index == 0) for index in range(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


class DirectBackend(Backend):
    """A column-parallel shard's ``functional.linear``, called straight."""

    name = "direct"

    def unsuited_reason(self, module: nn.Module) -> str | None:
        return None if isinstance(module, ColumnParallelLinear) else "not a column-parallel shard"

    def build(self, context: BuildContext) -> Built:
        if _rank_of("AITUNE_TEST_KILL_RANK") == RANK:
            os.kill(os.getpid(), signal.SIGKILL)
        module, wrong = context.module, _rank_of("AITUNE_TEST_WRONG_RANK") == RANK
        return Built(run=lambda x: functional.linear(x, module.weight, module.bias) + (1.0 if wrong else 0.0))


def main(out: Path, plan: Path | None) -> None:
    model, tokens = Model().eval(), torch.randn(4, 8, WIDTH, generator=torch.Generator().manual_seed(1))
    strategy = MinLatencyStrategy([DirectBackend()], margin=0.05, measure=MeasureConfig(max_repeats=30))
    config = LoopConfig(
        targets=("blocks.0.up", "blocks.1.up"),  # the linear shards: a block holds an all_reduce, which direct skips
        strategy=strategy,
        warmup_runs=1,
        measured_runs=6,
        verification=VerifyConfig(),
    )
    written: dict[str, Any] = {"rank": RANK}
    try:
        with torch.no_grad():
            result = optimize(model, tokens, model, config=config, plan=plan)
    except AituneError as error:
        written["error"] = str(error)
    else:
        written |= {
            "suggested": [target.path for target in result.suggestions.targets] if result.suggestions else None,
            "tuned": {region.path: region.backends for region in result.tuned},
            "plan": result.plan,
            "ranks": result.ranks,
            "tuning": result.tuning,
            "comparison": result.comparison(),
        }
    (out / f"rank{RANK}.json").write_text(json.dumps(written))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None)
