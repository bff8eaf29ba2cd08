"""A Mixtral-style mixture of experts: each token routed to 2 of 4 experts, a data-dependent dispatch per layer."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from zoo.tiny_configs import VOCAB, mixtral_config

DESCRIPTION = "MixtralForCausalLM, 2 layers, hidden 32, 4 experts (top 2), 1 × 16 tokens, the logits"


def build() -> tuple[nn.Module, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    from transformers import MixtralForCausalLM

    torch.manual_seed(0)
    model = MixtralForCausalLM(mixtral_config()).eval()
    ids = torch.randint(3, VOCAB, (1, 16), generator=torch.Generator().manual_seed(1))

    @torch.no_grad()
    def logits(input_ids: torch.Tensor) -> torch.Tensor:
        return model(input_ids, use_cache=False).logits

    return model, ids, logits
