"""A small pipeline for the tune loop's tests: a conv encoder called in a loop, an MLP head, and a module
no backend can match (it adds fresh noise on every call, so every candidate fails the correctness gate).

aitune-profile tune tests/apps/loop_app.py:infer --input x --targets encoder,head,noisy
"""

from __future__ import annotations

import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 3, 3, padding=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


class Noisy(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 0.01 * torch.randn_like(x)


class Pipeline:
    def __init__(self) -> None:
        torch.manual_seed(0)
        self.encoder = Encoder().eval()
        self.head = nn.Sequential(nn.Linear(3 * 16 * 16, 64), nn.GELU(), nn.Linear(64, 8)).eval()
        self.noisy = Noisy()

    @torch.no_grad()
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(3):
            x = self.encoder(x)
        x = self.noisy(x)
        return self.head(x.flatten(1))


def build() -> Pipeline:
    """A freshly built pipeline with the same weights every time."""
    return Pipeline()


pipe = build()
x = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))


def infer(x: torch.Tensor) -> torch.Tensor:
    return pipe(x)


class TwoStage(nn.Module):
    """A model tuned whole or by parts: two conv stages (torch layers only inside, so each is one region
    with nothing nested); ``noisy`` adds fresh noise outside them, so a build of the whole model fails
    the correctness gate while each stage alone passes it."""

    def __init__(self, noisy: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.first = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 3, 3, padding=1)).eval()
        self.second = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 3, 3, padding=1)).eval()
        self.noisy = noisy

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.second(self.first(x))
        return x + 0.01 * torch.randn_like(x) if self.noisy else x
