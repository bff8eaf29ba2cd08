"""The zoo's plain ``nn.Sequential`` conv net (children ``0``, ``1``, …) and its classifier left in training mode,
as apps for the command line.

aitune-profile tune tests/apps/sequential_app.py:infer --input x --obj model
aitune-profile tune tests/apps/sequential_app.py:infer_training --input x --obj training
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))  # the zoo, where the models live
from zoo import forgotten_eval, sequential_convnet

model, x, infer = sequential_convnet.build()
training, _, infer_training = forgotten_eval.build()
