"""A small text-to-image-shaped pipeline in pure torch, sized for a CPU: the bundled example app.

Its shape is the one aitune is built for: a pipeline object (not an nn.Module) holding a text
encoder, a denoiser called in a loop over a ``ModuleList`` of blocks, a decoder reached through a
``decode`` method, and glue math (guidance, scheduler step, post-processing) outside every module.

    aitune-profile capture examples/pipeline_app.py:infer --input input_data
"""

from __future__ import annotations

import torch
from torch import nn


class TextEncoder(nn.Module):
    """Token ids → conditioning vectors (embedding + two transformer encoder layers)."""

    def __init__(self, vocab: int = 1000, width: int = 128, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        layer = nn.TransformerEncoderLayer(width, nhead=4, dim_feedforward=4 * width, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        return self.encoder(self.embed(token_ids))


class ResBlock(nn.Module):
    def __init__(self, channels: int, cond_width: int) -> None:
        super().__init__()
        self.norm = nn.GroupNorm(8, channels)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.cond = nn.Linear(cond_width, channels)

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        h = self.conv1(torch.nn.functional.silu(self.norm(x)))
        h = h + self.cond(cond)[:, :, None, None]
        return x + self.conv2(torch.nn.functional.silu(h))


class Denoiser(nn.Module):
    """The UNet-like network called once per step: conv in, a ModuleList of blocks, conv out."""

    def __init__(self, latent_channels: int = 4, channels: int = 64, cond_width: int = 128, depth: int = 3) -> None:
        super().__init__()
        self.conv_in = nn.Conv2d(latent_channels, channels, 3, padding=1)
        self.blocks = nn.ModuleList(ResBlock(channels, cond_width) for _ in range(depth))
        self.conv_out = nn.Conv2d(channels, latent_channels, 3, padding=1)

    def forward(self, latents: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        h = self.conv_in(latents)
        for block in self.blocks:
            h = block(h, cond)
        return self.conv_out(h)


class Decoder(nn.Module):
    """A VAE-like decoder whose users call ``decode`` (as diffusers pipelines call ``vae.decode``)."""

    def __init__(self, latent_channels: int = 4, channels: int = 32) -> None:
        super().__init__()
        self.post_quant = nn.Conv2d(latent_channels, channels, 1)
        self.up = nn.Sequential(
            nn.Upsample(scale_factor=2),
            nn.Conv2d(channels, channels, 3, padding=1),
            nn.SiLU(),
            nn.Upsample(scale_factor=2),
            nn.Conv2d(channels, 3, 3, padding=1),
        )

    def forward(self, latents: torch.Tensor) -> torch.Tensor:
        return self.up(self.post_quant(latents))

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        return self(latents / 0.18215)


class Pipeline:
    """Pipeline-like object (plain class): modules as attributes, the loop and glue in ``__call__``."""

    def __init__(self, steps: int = 4, size: int = 32) -> None:
        torch.manual_seed(0)
        self.text_encoder = TextEncoder().eval()
        self.unet = Denoiser().eval()
        self.vae = Decoder().eval()
        self.steps = steps
        self.size = size
        self.device = torch.device("cpu")

    def to(self, device: str | torch.device) -> Pipeline:
        """Move every module to ``device``, as diffusers pipelines do."""
        self.device = torch.device(device)
        for module in (self.text_encoder, self.unet, self.vae):
            module.to(self.device)
        return self

    @torch.no_grad()  # as diffusers pipelines decorate __call__: inference builds no autograd graph
    def __call__(self, token_ids: torch.Tensor, guidance: float = 5.0) -> torch.Tensor:
        cond = self.text_encoder(token_ids).mean(dim=1)
        uncond = torch.zeros_like(cond)
        generator = torch.Generator().manual_seed(1234)
        latents = torch.randn(token_ids.shape[0], 4, self.size, self.size, generator=generator).to(self.device)
        for step in range(self.steps):
            both = self.unet(torch.cat([latents, latents]), torch.cat([uncond, cond]))
            noise_uncond, noise_cond = both.chunk(2)
            noise = noise_uncond + guidance * (noise_cond - noise_uncond)  # classifier-free guidance
            sigma = 1.0 - step / self.steps
            latents = (latents - sigma * 0.1 * noise) / (1.0 + 0.01 * sigma)  # a scheduler step
        image = self.vae.decode(latents)
        return ((image.clamp(-1, 1) + 1) * 127.5).round()


pipe = Pipeline()
input_data = {"token_ids": torch.randint(0, 1000, (2, 16), generator=torch.Generator().manual_seed(0))}


def infer(token_ids: torch.Tensor) -> torch.Tensor:
    """One text-to-image call: what ``aitune-profile capture`` profiles."""
    return pipe(token_ids)


if __name__ == "__main__":
    image = infer(**input_data)
    print(f"generated images of shape {tuple(image.shape)}")
