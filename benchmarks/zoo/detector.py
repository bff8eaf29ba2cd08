"""A single-stage detector: a convolutional backbone, a box and score head, then a Python loop of greedy
non-maximum suppression whose number of kept boxes depends on the image (no torchvision: its C ops do not load
beside the CPU torch)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

DESCRIPTION = "conv backbone (3 stages) + box/score head on 1 × 3 × 64 × 64, 256 anchors, Python NMS at IoU 0.5"
ANCHORS = 256


class TinyDetector(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.ReLU(),
        )  # fmt: skip
        self.head = nn.Conv2d(32, 4 * 4 + 4, 1)  # 4 anchors per cell: a box (4) and a score each

    def forward(self, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.head(self.backbone(image)).flatten(2).transpose(1, 2)  # (1, cells, 20)
        boxes = out[..., :16].reshape(-1, 4).sigmoid() * 64
        boxes = torch.cat([boxes[:, :2], boxes[:, :2] + boxes[:, 2:] / 4 + 1], dim=1)  # x0 y0 x1 y1
        return boxes, out[..., 16:].reshape(-1).sigmoid()


def nms(boxes: torch.Tensor, scores: torch.Tensor, iou: float = 0.5, keep_above: float = 0.3) -> torch.Tensor:
    """Greedy non-maximum suppression, one box at a time in Python: the boxes kept, best first."""
    order = scores.argsort(descending=True)
    order = order[scores[order] > keep_above]
    kept = []
    while order.numel():
        best, rest = order[0], order[1:]
        kept.append(best)
        low = torch.maximum(boxes[best, :2], boxes[rest, :2])
        high = torch.minimum(boxes[best, 2:], boxes[rest, 2:])
        inter = (high - low).clamp(min=0).prod(dim=1)
        area = (boxes[:, 2:] - boxes[:, :2]).prod(dim=1)
        order = rest[inter / (area[best] + area[rest] - inter) <= iou]
    return boxes[torch.stack(kept)] if kept else boxes[:0]


def build() -> tuple[nn.Module, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    torch.manual_seed(0)
    model = TinyDetector().eval()
    image = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(1))

    @torch.no_grad()
    def detect(pixels: torch.Tensor) -> torch.Tensor:
        return nms(*model(pixels))

    return model, image, detect
