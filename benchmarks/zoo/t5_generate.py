"""An encoder-decoder ``generate`` with a cache object: T5ForConditionalGeneration (an ``EncoderDecoderCache``
passed to every decoder call and grown in place)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from zoo.tiny_configs import VOCAB, t5_config

DESCRIPTION = "T5ForConditionalGeneration, 2 + 2 layers, d_model 32, 12 tokens in, 8 generated greedily"
NEW_TOKENS = 8


def build() -> tuple[nn.Module, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    from transformers import T5ForConditionalGeneration

    torch.manual_seed(0)
    model = T5ForConditionalGeneration(t5_config()).eval()
    ids = torch.randint(3, VOCAB, (1, 12), generator=torch.Generator().manual_seed(1))

    def generate(input_ids: torch.Tensor) -> torch.Tensor:
        return model.generate(input_ids, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False)

    return model, ids, generate
