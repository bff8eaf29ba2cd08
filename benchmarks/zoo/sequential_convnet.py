"""A plain ``nn.Sequential`` conv net, as many users write one: its children are named ``0``, ``1``, … and those
are the module paths suggest, ``--targets``, ``wrap`` and plans take (``model[2]``, ``get_submodule("2")``)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

DESCRIPTION = "nn.Sequential of 3 convs, pooling and a linear head (children 0–7), 4 × 3 × 32 × 32 images"


def build() -> tuple[nn.Sequential, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
        nn.Conv2d(64, 64, 3, padding=1), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(64, 10),
    ).eval()  # fmt: skip
    images = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(1))

    @torch.no_grad()
    def classify(batch: torch.Tensor) -> torch.Tensor:
        return model(batch)

    return model, images, classify
