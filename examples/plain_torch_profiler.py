"""A trace made with plain torch.profiler, the way torch's docs show, for ``aitune-profile analyze``.

No aitune here: a small classifier marks its parts with ``record_function``, and the loop records a
few iterations under a profiler schedule, calling ``prof.step()`` after each. aitune reads the
trace offline: each ``ProfilerStep#N`` is a run, each annotation a region (``encoder`` becomes
``untuned_module:encoder``), and with ``--with-stack`` every module call is a region too.

    python examples/plain_torch_profiler.py                  # writes demo_out/plain_trace.json
    aitune-profile analyze demo_out/plain_trace.json
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule


class TinyClassifier(nn.Module):
    """Token ids → class logits: an embedding and two transformer layers, then a linear head."""

    def __init__(self, vocab: int = 1000, width: int = 64, classes: int = 10) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        layer = nn.TransformerEncoderLayer(width, nhead=4, dim_feedforward=4 * width, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(width, classes)

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        with record_function("encoder"):
            hidden = self.encoder(self.embed(token_ids))
        with record_function("head"):
            return self.head(hidden.mean(dim=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("demo_out/plain_trace.json"), help="the trace to write")
    parser.add_argument("--steps", type=int, default=5, help="iterations recorded (after 1 skipped, 1 warmup)")
    parser.add_argument("--with-stack", action="store_true", help="record Python stacks: module calls become regions")
    options = parser.parse_args()

    torch.manual_seed(0)
    model = TinyClassifier().eval()
    token_ids = torch.randint(0, 1000, (8, 32))
    plan = schedule(wait=1, warmup=1, active=options.steps)
    recording = profile(activities=[ProfilerActivity.CPU], schedule=plan, with_stack=options.with_stack)
    with torch.no_grad(), recording as prof:
        for _ in range(2 + options.steps):
            model(token_ids)
            prof.step()
    options.out.parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(options.out))
    print(f"trace: {options.out}")


if __name__ == "__main__":
    main()
