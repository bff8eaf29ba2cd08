"""A small decoder-only language model with a ``generate`` loop: the bundled LLM-shaped example.

``generate`` does real work outside ``forward`` (sampling, the growing context), as Hugging Face
models do on their ``GenerationMixin``.

    aitune-profile capture examples/decoder_app.py:infer --input input_data
"""

from __future__ import annotations

import torch
from torch import nn


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention then an MLP."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attention = nn.MultiheadAttention(width, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.shape[1]
        mask = torch.triu(torch.ones(length, length, dtype=torch.bool, device=x.device), diagonal=1)
        h = self.norm1(x)
        x = x + self.attention(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 2048, width: int = 384, depth: int = 6, heads: int = 6, context: int = 128) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(depth))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(token_ids.shape[1], device=token_ids.device)
        x = self.embed(token_ids) + self.position(positions)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))

    @torch.no_grad()  # as transformers' generate: inference builds no autograd graph
    def generate(self, token_ids: torch.Tensor, max_new_tokens: int = 16, temperature: float = 0.8) -> torch.Tensor:
        """Sample ``max_new_tokens`` tokens, one forward per token (no KV cache), seeded for repeatability."""
        generator = torch.Generator(device=token_ids.device).manual_seed(0)
        for _ in range(max_new_tokens):
            logits = self(token_ids)[:, -1, :] / temperature
            probabilities = torch.softmax(logits, dim=-1)
            next_token = torch.multinomial(probabilities, 1, generator=generator)
            token_ids = torch.cat([token_ids, next_token], dim=1)
        return token_ids


model = TinyLM().eval()
input_data = {"token_ids": torch.randint(0, 2048, (1, 32), generator=torch.Generator().manual_seed(0))}


def infer(token_ids: torch.Tensor) -> torch.Tensor:
    return model.generate(token_ids)


if __name__ == "__main__":
    print(infer(**input_data)[0].tolist())
