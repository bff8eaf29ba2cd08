"""A pipeline whose decoder the user compiled with ``torch.compile`` (backend "eager": no code generation, fast).

aitune-profile capture tests/apps/compiled_app.py:infer --input x    (entry mode)
aitune-profile capture tests/apps/compiled_app.py                    (script mode)
"""

import torch
from torch import nn


class Block(nn.Module):
    """A user module (not torch.nn's own), so torch.compile runs its hooks outside the graph and traces its inside."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.inner = nn.Sequential(nn.Linear(8, 8), nn.Tanh())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(torch.relu(self.proj(x)))


class Pipeline:
    def __init__(self) -> None:
        torch.manual_seed(0)
        self.encoder = Block()
        self.decoder = torch.compile(Block(), backend="eager")

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x))


pipe = Pipeline()
x = torch.randn(2, 8, generator=torch.Generator().manual_seed(0))


def infer(x: torch.Tensor) -> torch.Tensor:
    return pipe(x)


if __name__ == "__main__":
    print(f"sum {infer(x).sum().item():.6f}")
