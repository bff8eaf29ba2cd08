"""A tiny random-weight T5 whose ``generate`` passes one ``EncoderDecoderCache`` to every decoder call.

Weights are scaled up (``initializer_factor``) so greedy decoding picks varied tokens: a decoder that
saw the wrong cache would change them. ``infer()`` is the entry the command line tunes.
"""

from __future__ import annotations

import torch
from transformers import T5Config, T5ForConditionalGeneration

NEW_TOKENS = 5


def build() -> tuple[T5ForConditionalGeneration, torch.Tensor]:
    torch.manual_seed(0)
    config = T5Config(
        vocab_size=64,
        d_model=16,
        d_kv=8,
        d_ff=32,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=2,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
        initializer_factor=5.0,
    )
    ids = torch.randint(2, 64, (2, 6), generator=torch.Generator().manual_seed(1))
    return T5ForConditionalGeneration(config).eval(), ids


def generate(model: T5ForConditionalGeneration, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model.generate(ids, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False)


model, input_ids = build()


def infer() -> torch.Tensor:
    return generate(model, input_ids)
