"""The first screen looks through a region holding nine tenths of the run even beside siblings: real tiny models."""

import functools
import io

import pytest
import torch
from rich.console import Console
from torch import nn

import aitune.torch as ait
from aitune.cli.render import profile_summary
from aitune.report import headline_rows, render_markdown, validate
from aitune.report.headline import LOOK_THROUGH_SHARE


class TimmStyle(nn.Module):
    """An image classifier split as timm's are: ``forward`` calls ``forward_features``, then ``forward_head``."""

    def __init__(self) -> None:
        super().__init__()
        self.patch_embed = nn.Conv2d(3, 32, 4, stride=4)
        self.blocks = nn.Sequential(*(nn.Sequential(nn.Conv2d(32, 32, 3, padding=1), nn.GELU()) for _ in range(4)))
        self.norm = nn.BatchNorm2d(32)
        self.head = nn.Linear(32, 10)

    def forward_features(self, images: torch.Tensor) -> torch.Tensor:
        return self.norm(self.blocks(self.patch_embed(images)))

    def forward_head(self, features: torch.Tensor) -> torch.Tensor:
        return self.head(features.mean(dim=(2, 3)))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(images))


def bert_classifier() -> tuple[nn.Module, torch.Tensor]:
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=96,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    return BertForSequenceClassification(config).eval(), torch.randint(3, 96, (1, 16))


@functools.cache
def captured(name: str) -> dict:
    torch.manual_seed(0)
    model, data = (TimmStyle().eval(), torch.randn(2, 3, 64, 64)) if name == "timm" else bert_classifier()
    with torch.no_grad():
        return ait.profile(model, data, warmup_runs=1, measured_runs=3).data


def top_level(doc: dict) -> dict[str, float]:
    """Per top-level region of the document: its median CPU share."""
    shares: dict[str, list[float]] = {}
    for run in doc["runs"]:
        for share in run["regions"]:
            shares.setdefault(share["region_id"].partition(":")[2], []).append(share["cpu_time_fraction"])
    return {path: sorted(values)[len(values) // 2] for path, values in shares.items()}


@pytest.mark.parametrize(
    ("name", "dominant", "sibling"), [("timm", "forward_features", "forward_head"), ("bert", "bert", "classifier")]
)
def test_a_dominant_region_beside_a_small_sibling_is_shown_as_its_parts_on_every_first_screen(name, dominant, sibling):
    doc = captured(name)
    assert validate(doc) == []
    assert "spanning_regions" not in doc and {dominant, sibling} <= set(top_level(doc))
    assert top_level(doc)[dominant] >= LOOK_THROUGH_SHARE  # the case the rule is for: 99% beside a tiny head

    rows = headline_rows(doc)
    console = Console(file=io.StringIO(), width=200)
    console.print(profile_summary(doc, limit=50))
    terminal = [line.split("│")[1].strip() for line in console.file.getvalue().splitlines() if line.startswith("│")]
    summary = render_markdown(doc).split("## Summary")[1].split("\n## ")[0]

    paths = [row.path for row in rows]
    parts = [path for path in paths if path not in top_level(doc) and not path.endswith(")")]  # its children
    assert dominant not in paths and f"{dominant} (self)" in paths and parts, paths
    assert sibling in paths  # the sibling stays as it is
    for index in range(len(doc["runs"])):
        assert sum(row.fractions[index] for row in rows) == pytest.approx(1)
    for shown in (terminal, [line.split("|")[1].strip() for line in summary.splitlines() if line.startswith("|")]):
        labels = {label.partition(":")[2] or label for label in shown}
        assert f"{dominant} (self)" in labels and set(parts) <= labels and sibling in labels
        assert dominant not in labels
