"""A diffusers unconditional pipeline: DDPMPipeline over a tiny UNet2DModel, a few denoising steps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

DESCRIPTION = "DDPMPipeline, tiny UNet2DModel, 1 × 3 × 32 × 32, 4 steps"
STEPS = 4


def build() -> tuple[Any, int, Callable[[int], torch.Tensor]]:
    from diffusers import DDPMPipeline, DDPMScheduler, UNet2DModel

    torch.manual_seed(0)
    unet = UNet2DModel(
        sample_size=32,
        in_channels=3,
        out_channels=3,
        layers_per_block=1,
        block_out_channels=(16, 32),
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        norm_num_groups=8,
    ).eval()
    pipe = DDPMPipeline(unet=unet, scheduler=DDPMScheduler(num_train_timesteps=100))
    pipe.set_progress_bar_config(disable=True)

    def draw(steps: int) -> torch.Tensor:
        images = pipe(
            batch_size=1, num_inference_steps=steps, output_type="np", generator=torch.Generator().manual_seed(0)
        ).images
        return torch.from_numpy(images)

    return pipe, STEPS, draw
