"""Two tiny classifiers for the precision tests: one whose two classes are near-tied on every input (int8 flips
its decisions), one whose classes are far apart (int8 keeps them).

aitune-profile tune tests/apps/classifier_app.py:infer --input x --targets body --precision int8
(add --eval-inputs eval_inputs to judge a second input as well)
"""

from __future__ import annotations

import torch
from torch import nn

FEATURES, HIDDEN, BATCH = 32, 64, 32


class Classifier(nn.Module):
    """``body`` (Linear, ReLU, Linear) maps features to 2 logits; ``gap`` sets how far apart the two classes are."""

    def __init__(self, gap: float) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 2))
        with torch.no_grad():
            head = self.body[2]
            # Two rows almost equal: the logits differ by ``gap`` times a small random projection.
            head.weight[1] = head.weight[0] + gap * torch.randn(HIDDEN)
            head.bias[1] = head.bias[0]
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def near_tied() -> Classifier:
    return Classifier(gap=1e-4)


def well_apart() -> Classifier:
    return Classifier(gap=10.0)


def _far_from_the_boundary(count: int) -> torch.Tensor:
    """``count`` inputs on which `well_apart`'s two logits differ by more than 4 (int8's error is far below)."""
    drawn = torch.randn(8 * count, FEATURES, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = well_apart()(drawn)
    return drawn[(logits[:, 0] - logits[:, 1]).abs() > 4][:count]


def near_the_boundary(count: int) -> torch.Tensor:
    """``count`` inputs on which `well_apart`'s two logits are all but tied (bisected between the two classes)."""
    model = well_apart()
    drawn = torch.randn(8 * count, FEATURES, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        first = _first_class(model, drawn)
        low, high = drawn[first][:count], drawn[~first][:count]
        for _ in range(40):
            middle = (low + high) / 2
            on_first = _first_class(model, middle).unsqueeze(-1)
            low, high = torch.where(on_first, middle, low), torch.where(on_first, high, middle)
    return (low + high) / 2


def _first_class(model: Classifier, inputs: torch.Tensor) -> torch.Tensor:
    logits = model(inputs)
    return logits[:, 0] > logits[:, 1]


model = near_tied()
x = _far_from_the_boundary(BATCH)
eval_inputs = [x[: BATCH // 2]]  # for --eval-inputs: half the recorded rows again
wrong_width_inputs = [x[: BATCH // 2], x[:4, :-1]]  # for --eval-inputs: the second one the model rejects


@torch.no_grad()
def infer(inputs: torch.Tensor) -> torch.Tensor:
    return model(inputs)
