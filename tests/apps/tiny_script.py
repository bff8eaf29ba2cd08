"""A script captured whole: a model held by a local of main(), and an anonymous layer called once."""

import sys

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def main() -> None:
    model = Net()
    print("script args:", sys.argv[1:])
    print("to stderr from the script", file=sys.stderr)
    model(torch.ones(2, 4))
    nn.Linear(4, 2)(torch.ones(1, 4))


if __name__ == "__main__":
    main()
