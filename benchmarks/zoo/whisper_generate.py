"""A speech-style encoder-decoder: WhisperForConditionalGeneration ``generate`` on random log-mel features."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

DESCRIPTION = "WhisperForConditionalGeneration, 2 + 2 layers, d_model 32, 8 mel bins × 64 frames, 8 tokens"
VOCAB = 96
NEW_TOKENS = 8


def build() -> tuple[nn.Module, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    torch.manual_seed(0)
    config = WhisperConfig(
        vocab_size=VOCAB,
        num_mel_bins=8,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_source_positions=32,
        max_target_positions=48,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
        suppress_tokens=[],
        begin_suppress_tokens=[],
    )
    model = WhisperForConditionalGeneration(config).eval()
    model.generation_config.forced_decoder_ids = None
    # The encoder's two convolutions (the second with stride 2) take 2 × max_source_positions frames.
    features = torch.randn(1, 8, 64, generator=torch.Generator().manual_seed(1))

    def generate(input_features: torch.Tensor) -> torch.Tensor:
        return model.generate(input_features, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False)

    return model, features, generate
