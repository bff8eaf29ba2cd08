"""A diffusers text-to-image pipeline: StableDiffusionPipeline assembled from a tiny UNet2DConditionModel,
AutoencoderKL and CLIPTextModel built from configs, a PNDM scheduler and a CLIP tokenizer over a
character vocabulary written to a temporary folder (nothing downloaded)."""

from __future__ import annotations

import json
import string
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

DESCRIPTION = "StableDiffusionPipeline, tiny UNet/VAE/CLIP text encoder, 32 × 32 image, 3 steps, guidance 7.5"
PROMPT = "a photo of a cat"
STEPS = 3
TOKENS = 16


def build() -> tuple[Any, str, Callable[[str], torch.Tensor]]:
    from diffusers import AutoencoderKL, PNDMScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        block_out_channels=(32, 64),
        layers_per_block=1,
        sample_size=16,
        in_channels=4,
        out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=32,
        attention_head_dim=8,
        norm_num_groups=8,
    )
    vae = AutoencoderKL(
        block_out_channels=(16, 32),
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        latent_channels=4,
        layers_per_block=1,
        norm_num_groups=8,
        sample_size=32,
    )
    tokenizer = _tokenizer()
    text_encoder = CLIPTextModel(
        CLIPTextConfig(
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            hidden_size=32,
            intermediate_size=37,
            num_attention_heads=4,
            num_hidden_layers=2,
            vocab_size=len(tokenizer),
            max_position_embeddings=TOKENS,
        )
    )
    pipe = StableDiffusionPipeline(
        vae=vae.eval(),
        text_encoder=text_encoder.eval(),
        tokenizer=tokenizer,
        unet=unet.eval(),
        scheduler=PNDMScheduler(skip_prk_steps=True, steps_offset=1),
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    pipe.set_progress_bar_config(disable=True)

    def draw(prompt: str) -> torch.Tensor:
        return pipe(
            prompt,
            num_inference_steps=STEPS,
            guidance_scale=7.5,
            height=32,
            width=32,
            output_type="pt",
            generator=torch.Generator().manual_seed(0),
        ).images

    return pipe, PROMPT, draw


def _tokenizer() -> Any:
    """A CLIP tokenizer over single characters (no merges): enough to turn a prompt into token ids."""
    from transformers import CLIPTokenizer

    folder = Path(tempfile.mkdtemp(prefix="aitune-zoo-clip-"))
    vocab: dict[str, int] = {}
    for char in string.ascii_lowercase + string.digits + ".,!?":
        vocab.setdefault(char, len(vocab))
        vocab.setdefault(char + "</w>", len(vocab))
    for special in ("<|startoftext|>", "<|endoftext|>"):
        vocab[special] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (folder / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
    return CLIPTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"), model_max_length=TOKENS)
