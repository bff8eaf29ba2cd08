"""An entry method handing out a child that runs outside its module's forward (Whisper's ``get_encoder``)."""

import functools

import torch
from torch import nn

import aitune.torch as ait
from aitune.suggest import suggest


class Seq2Seq(nn.Module):
    """As transformers' WhisperModel: ``get_encoder`` hands out the encoder; ``forward`` runs the decoder only."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(*(nn.Sequential(nn.Linear(64, 64), nn.GELU()) for _ in range(6)))
        self.decoder = nn.Sequential(nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 64))

    def get_encoder(self) -> nn.Module:
        return self.encoder

    def forward(self, tokens: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
        return self.decoder(tokens + states.mean(dim=1))


class ForGeneration(nn.Module):
    """As WhisperForConditionalGeneration: ``generate`` calls ``model.get_encoder()(...)``, then decodes."""

    def __init__(self) -> None:
        super().__init__()
        self.model = Seq2Seq()
        self.proj_out = nn.Linear(64, 64)

    def forward(self, tokens: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
        return self.proj_out(self.model(tokens, states))

    def generate(self, features: torch.Tensor, steps: int = 3) -> torch.Tensor:
        states = self.model.get_encoder()(features)
        tokens = torch.zeros(features.shape[0], 64)
        for _ in range(steps):
            tokens = self(tokens, states)
        return tokens


@functools.cache
def captured() -> dict:
    torch.manual_seed(0)
    model, features = ForGeneration().eval(), torch.randn(4, 256, 64)
    with torch.no_grad():
        return ait.profile(model, features, model.generate, warmup_runs=1, measured_runs=3).data


def test_an_entry_method_that_hands_out_a_child_names_the_child_as_the_target():
    doc = captured()

    suggestions = suggest(doc)

    targets = {target.path: target for target in suggestions.targets}
    model, encoder = targets["model"], targets["model.encoder"]
    assert [r.code for r in model.reasons if r.code in ("ENTRY_METHOD", "CHILD_OUTSIDE_FORWARD")] == [
        "CHILD_OUTSIDE_FORWARD"
    ]
    outside = next(r for r in model.reasons if r.code == "CHILD_OUTSIDE_FORWARD")
    assert outside.blocking and outside.message.startswith(
        "model.encoder runs outside model's forward (handed out by model.get_encoder)"
    )
    assert not any("whose forward does the work" in r.message for r in model.reasons)
    assert "OUTSIDE_PARENT" in [r.code for r in encoder.reasons]
    # Nothing about where it runs holds the encoder back (whether its predicted gain clears the bar is the
    # gain model's, which a cached calibration of the machine decides).
    gain_only = {"NO_MEASURED_GAIN", "TOO_SMALL"}
    assert encoder.inside == () and not [r.code for r in encoder.reasons if r.blocking and r.code not in gain_only]
    assert "model" not in [t.path for t in suggestions.recommended()]
