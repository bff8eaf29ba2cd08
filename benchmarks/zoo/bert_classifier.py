"""A BERT-style sequence classifier: BertForSequenceClassification (``bert`` body, ``classifier`` head)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from zoo.tiny_configs import VOCAB, bert_config

DESCRIPTION = "BertForSequenceClassification, 2 layers, hidden 32, 1 × 16 tokens"


def build() -> tuple[nn.Module, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    from transformers import BertForSequenceClassification

    torch.manual_seed(0)
    model = BertForSequenceClassification(bert_config(num_labels=3)).eval()
    ids = torch.randint(3, VOCAB, (1, 16), generator=torch.Generator().manual_seed(1))

    @torch.no_grad()
    def classify(input_ids: torch.Tensor) -> torch.Tensor:
        return model(input_ids).logits

    return model, ids, classify
