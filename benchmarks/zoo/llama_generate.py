"""A Llama-style decoder ``generate``: grouped-query attention, rotary positions, a `DynamicCache`, greedy."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from zoo.tiny_configs import VOCAB, llama_config

DESCRIPTION = "LlamaForCausalLM, 2 layers, hidden 32, 4 heads over 2 KV heads, 8 tokens in, 8 generated greedily"
NEW_TOKENS = 8


def build() -> tuple[nn.Module, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(llama_config()).eval()
    ids = torch.randint(3, VOCAB, (1, 8), generator=torch.Generator().manual_seed(1))

    def generate(input_ids: torch.Tensor) -> torch.Tensor:
        return model.generate(
            input_ids,
            attention_mask=torch.ones_like(input_ids),
            max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS,
            do_sample=False,
        )

    return model, ids, generate
