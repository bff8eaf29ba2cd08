"""An RNN encoder-decoder with a Python loop: a GRU encoder and a GRU decoder cell driven by a
hand-written greedy loop, one decoder call per output token (the way pre-transformer translators ran)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

DESCRIPTION = "GRU encoder (2 layers, hidden 64) + GRU decoder, greedy loop of 12 steps, 20 tokens in"
VOCAB = 64
HIDDEN = 64
STEPS = 12
START = 1


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, HIDDEN)
        self.gru = nn.GRU(HIDDEN, HIDDEN, num_layers=2, batch_first=True)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        _, hidden = self.gru(self.embedding(tokens))
        return hidden


class Decoder(nn.Module):
    """One step: the previous token and hidden state in, the next logits and hidden state out."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, HIDDEN)
        self.gru = nn.GRU(HIDDEN, HIDDEN, num_layers=2, batch_first=True)
        self.out = nn.Linear(HIDDEN, VOCAB)

    def forward(self, token: torch.Tensor, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        output, hidden = self.gru(self.embedding(token), hidden)
        return self.out(output[:, -1]), hidden


class Translator(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = Encoder()
        self.decoder = Decoder()

    @torch.no_grad()
    def translate(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder(tokens)
        token = torch.full((tokens.shape[0], 1), START, dtype=torch.long)
        out = []
        for _ in range(STEPS):
            logits, hidden = self.decoder(token, hidden)
            token = logits.argmax(-1, keepdim=True)
            out.append(token)
        return torch.cat(out, dim=1)


def build() -> tuple[nn.Module, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    torch.manual_seed(0)
    model = Translator().eval()
    tokens = torch.randint(2, VOCAB, (1, 20), generator=torch.Generator().manual_seed(1))
    return model, tokens, model.translate
