"""A script that profiles itself twice with the Python API: the CLI collects both profiles."""

import torch
from torch import nn

import aitune.torch as ait

model = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
for runs in (1, 2):
    ait.profile(model, torch.ones(1, 4), warmup_runs=0, measured_runs=runs)
