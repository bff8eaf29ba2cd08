"""A BERT-style sequence classifier: BertForSequenceClassification (``bert`` body, ``classifier`` head)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

DESCRIPTION = "BertForSequenceClassification, 2 layers, hidden 32, 1 × 16 tokens"
VOCAB = 96


def build() -> tuple[nn.Module, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        num_labels=3,
    )
    model = BertForSequenceClassification(config).eval()
    ids = torch.randint(3, VOCAB, (1, 16), generator=torch.Generator().manual_seed(1))

    @torch.no_grad()
    def classify(input_ids: torch.Tensor) -> torch.Tensor:
        return model(input_ids).logits

    return model, ids, classify
