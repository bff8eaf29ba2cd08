"""Extractive question answering as a service sees it: DistilBertForQuestionAnswering on a different sequence
length at every call, the lengths rotating with a period of `CYCLE` calls (``tune --cycle 3``)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch
from torch import nn

from zoo.tiny_configs import VOCAB

LENGTHS = (12, 48, 24)
CYCLE = len(LENGTHS)
DESCRIPTION = f"DistilBertForQuestionAnswering, 2 layers, dim 32, 1 × {'/'.join(map(str, LENGTHS))} tokens in turn"


def build() -> tuple[nn.Module, None, Callable[[], torch.Tensor]]:
    from transformers import DistilBertConfig, DistilBertForQuestionAnswering

    torch.manual_seed(0)
    config = DistilBertConfig(
        vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64
    )
    model = DistilBertForQuestionAnswering(config).eval()
    questions = itertools.cycle(
        [torch.randint(3, VOCAB, (1, length), generator=torch.Generator().manual_seed(length)) for length in LENGTHS]
    )

    @torch.no_grad()
    def answer() -> torch.Tensor:
        out = model(next(questions))
        return torch.stack([out.start_logits.argmax(-1), out.end_logits.argmax(-1)])

    return model, None, answer
