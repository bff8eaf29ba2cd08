"""A decoder-only ``generate``: GPT2LMHeadModel, greedy, with its KV cache."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

DESCRIPTION = "GPT2LMHeadModel, 2 layers, n_embd 32, 8 tokens in, 8 generated greedily"
VOCAB = 96
NEW_TOKENS = 8


def build() -> tuple[nn.Module, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=VOCAB,
        n_positions=64,
        n_embd=32,
        n_layer=2,
        n_head=4,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    model = GPT2LMHeadModel(config).eval()
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
