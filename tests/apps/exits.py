"""Entry functions that misuse the capture: one exits instead of returning, one needs an input it was not given."""

import sys

import torch

model = torch.nn.Linear(2, 2)


def infer():
    sys.exit(3)


def needs_input(x):
    return model(x)
