"""An image classifier with a features/head split: transformers' ResNet (``resnet`` features, ``classifier`` head)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

DESCRIPTION = "ResNetForImageClassification, 2 stages, 1 × 3 × 64 × 64 image"


def build() -> tuple[nn.Module, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    from transformers import ResNetConfig, ResNetForImageClassification

    torch.manual_seed(0)
    config = ResNetConfig(
        num_channels=3,
        embedding_size=16,
        hidden_sizes=[16, 32],
        depths=[1, 1],
        layer_type="basic",
        num_labels=10,
    )
    model = ResNetForImageClassification(config).eval()
    image = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(1))

    @torch.no_grad()
    def classify(pixel_values: torch.Tensor) -> torch.Tensor:
        return model(pixel_values).logits

    return model, image, classify
