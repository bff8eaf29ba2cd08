"""Tune a tensor-parallel toy under torchrun with `aitune.torch.optimize`; each rank writes what it decided.

``python tp_tune.py OUT [PLAN]`` under ``torchrun --nproc-per-node N`` (``examples/`` on the path): the
bundled example's MLP split over the ranks (column-parallel ``up``, row-parallel ``down`` whose partial
sums meet in ``dist.all_reduce``), tuned with one backend, ``direct``, that runs a column-parallel
shard's ``functional.linear`` straight (so it skips whatever the module's own forward adds). Rank
``AITUNE_EXAMPLE_SLOW_RANK`` sleeps ``AITUNE_EXAMPLE_SLOW_MS`` inside ``blocks.0.up``: only there does
``direct`` win, and only for that rank.
``AITUNE_TEST_WRONG_RANK``: ``direct`` computes a wrong answer on that rank (its gate rejects it);
``AITUNE_TEST_KILL_RANK``: that rank dies (SIGKILL) while ``direct`` builds. With ``PLAN``, the plan
is replayed instead of searched. Each rank writes ``OUT/rank<r>.json``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import tensor_parallel_app as example  # the bundled example: the sharded model, its group made at import
import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional

from aitune.compare.verification import VerifyConfig
from aitune.errors import AituneError
from aitune.torch import LoopConfig, optimize
from aitune.torch.backends import Backend, BuildContext, Built
from aitune.torch.tuning.measure import MeasureConfig
from aitune.torch.tuning.strategies import MinLatencyStrategy

RANK = example.RANK


def _rank_of(name: str) -> int:
    return int(os.environ.get(name, "-1"))


class DirectBackend(Backend):
    """A column-parallel shard's ``functional.linear``, called straight."""

    name = "direct"

    def unsuited_reason(self, module: nn.Module) -> str | None:
        return None if isinstance(module, example.ColumnParallelLinear) else "not a column-parallel shard"

    def build(self, context: BuildContext) -> Built:
        if _rank_of("AITUNE_TEST_KILL_RANK") == RANK:
            os.kill(os.getpid(), signal.SIGKILL)
        module, wrong = context.module, _rank_of("AITUNE_TEST_WRONG_RANK") == RANK
        return Built(run=lambda x: functional.linear(x, module.weight, module.bias) + (1.0 if wrong else 0.0))


def main(out: Path, plan: Path | None) -> None:
    model, tokens = example.model, example.tokens
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
