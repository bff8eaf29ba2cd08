"""Three small CPU-sized models, each dominated by one block worth tuning: an MLP, a conv net, a transformer encoder.

Each builder returns ``(model, example_input, path)``: ``path`` is the dotted path of the dominant
module, the one ``aitune.torch.wrap(model, path)`` wraps. Glue outside the block stays eager.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch
from torch import nn


class MlpModel(nn.Module):
    """Feature vectors → a deep MLP block (the dominant module) → a small head."""

    def __init__(self, width: int = 1024, depth: int = 4) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for _ in range(depth):
            layers += [nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width), nn.LayerNorm(width)]
        self.mlp = nn.Sequential(*layers)
        self.head = nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.mlp(x)).softmax(dim=-1)


class BasicBlock(nn.Module):
    def __init__(self, inputs: int, outputs: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.shortcut = nn.Identity()
        if stride != 1 or inputs != outputs:
            self.shortcut = nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride, bias=False), nn.BatchNorm2d(outputs))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(h)) + self.shortcut(x))


class ConvModel(nn.Module):
    """A ResNet-18-like backbone (the dominant module) with a pooling head; ``widths`` are its stages'
    channels (two blocks per step between them), fewer for a model that compiles in seconds."""

    def __init__(self, classes: int = 1000, widths: tuple[int, ...] = (64, 64, 128, 256, 512)) -> None:
        super().__init__()
        stages: list[nn.Module] = [
            nn.Conv2d(3, widths[0], 7, 2, 3, bias=False),
            nn.BatchNorm2d(widths[0]),
            nn.ReLU(),
            nn.MaxPool2d(3, 2, 1),
        ]
        for inputs, outputs in itertools.pairwise(widths):
            stride = 1 if inputs == outputs else 2
            stages += [BasicBlock(inputs, outputs, stride), BasicBlock(outputs, outputs, 1)]
        self.backbone = nn.Sequential(*stages)
        self.fc = nn.Linear(widths[-1], classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.fc(self.backbone(images).mean(dim=(2, 3)))


class EncoderModel(nn.Module):
    """Token embeddings → a transformer encoder (the dominant module) → mean-pooled features."""

    def __init__(self, vocab: int = 8000, width: int = 256, layers: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        layer = nn.TransformerEncoderLayer(width, nhead=8, dim_feedforward=4 * width, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        return self.encoder(self.embed(token_ids)).mean(dim=1)


def mlp_example() -> tuple[nn.Module, torch.Tensor, str]:
    torch.manual_seed(0)
    return MlpModel().eval(), torch.randn(64, 1024), "mlp"


def conv_example() -> tuple[nn.Module, torch.Tensor, str]:
    torch.manual_seed(0)
    return ConvModel().eval(), torch.randn(8, 3, 224, 224), "backbone"


def encoder_example() -> tuple[nn.Module, torch.Tensor, str]:
    torch.manual_seed(0)
    return EncoderModel().eval(), torch.randint(0, 8000, (8, 128)), "encoder"


EXAMPLES: dict[str, Callable[[], tuple[nn.Module, torch.Tensor, str]]] = {
    "mlp": mlp_example,
    "conv": conv_example,
    "encoder": encoder_example,
}
