"""An image classifier whose ``.eval()`` was forgotten: its BatchNorm layers update their running statistics
and its Dropout draws a fresh mask on every call. Capture warns (``TRAINING_MODE``) and puts the statistics
back; ``tune`` refuses it, naming ``.eval()`` (the zoo benchmark reports that refusal)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

DESCRIPTION = "conv + BatchNorm + Dropout classifier left in training mode, 4 × 3 × 32 × 32 images"


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )  # fmt: skip
        self.head = nn.Sequential(nn.Dropout(0.5), nn.Linear(32, 10))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(images))


def build() -> tuple[Classifier, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    torch.manual_seed(0)
    model = Classifier()  # no .eval(): the mistake this app is about
    images = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(1))

    @torch.no_grad()
    def classify(batch: torch.Tensor) -> torch.Tensor:
        torch.manual_seed(0)  # the same Dropout mask on every call, as the zoo's apps seed their own noise
        return model(batch)

    return model, images, classify
