"""Tiny random-weight Hugging Face models as test workloads: built from configs (no hub download), seeded.

Each builder returns the object to profile, its input, and the inference function (``None``: call
the object), ready for ``aitune.torch.profile(obj, input_data, inference_function)``::

    from hf_models import llama_decoder
    model, input_data, infer = llama_decoder()
    prof = aitune.torch.profile(model, input_data, infer, warmup_runs=1, measured_runs=2)

Sizes are chosen for a busy CPU: a call takes milliseconds, so a profile takes well under a second.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from zoo.tiny_configs import VOCAB, bert_config, llama_config, t5_config

NEW_TOKENS = 4


def _tokens(length: int = 8) -> torch.Tensor:
    return torch.randint(3, VOCAB, (1, length), generator=torch.Generator().manual_seed(0))


def llama_decoder() -> tuple[nn.Module, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    """A 2-layer Llama-style decoder; ``generate`` adds `NEW_TOKENS` tokens greedily (KV cache on)."""
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(llama_config()).eval()
    return model, _tokens(), lambda ids: model.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False)


def llama_generate(model: nn.Module, ids: torch.Tensor, cache: str = "dynamic") -> torch.Tensor:
    """``model.generate`` greedily for `NEW_TOKENS` tokens with the cache transformers names ``cache`` (``dynamic``:
    a `DynamicCache`, ``static``: a `StaticCache`)."""
    with torch.no_grad():
        return model.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False, cache_implementation=cache)


def t5_encoder_decoder() -> tuple[nn.Module, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    """A 2+2-layer T5-style encoder-decoder; ``generate`` decodes `NEW_TOKENS` tokens greedily."""
    from transformers import T5ForConditionalGeneration

    torch.manual_seed(0)
    model = T5ForConditionalGeneration(t5_config()).eval()
    return model, _tokens(), lambda ids: model.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False)


def bert_encoder() -> tuple[nn.Module, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    """A 2-layer BERT-style encoder, profiled through its forward (the output: the last hidden state)."""
    from transformers import BertModel

    torch.manual_seed(0)
    model = BertModel(bert_config()).eval()
    return model, _tokens(), lambda ids: model(ids).last_hidden_state


class DiffusionPipeline:
    """A plain object, as diffusers pipelines are: a UNet called in a denoising loop, then ``vae.decode``."""

    def __init__(self, steps: int = 3) -> None:
        from diffusers import AutoencoderKL, UNet2DConditionModel

        torch.manual_seed(0)
        self.unet = UNet2DConditionModel(
            sample_size=8,
            in_channels=4,
            out_channels=4,
            layers_per_block=1,
            block_out_channels=(32, 64),
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
            cross_attention_dim=16,
            attention_head_dim=8,
            norm_num_groups=8,
        ).eval()
        self.vae = AutoencoderKL(
            in_channels=3,
            out_channels=3,
            down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
            up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
            block_out_channels=(16, 32),
            latent_channels=4,
            layers_per_block=1,
            norm_num_groups=8,
            sample_size=16,
        ).eval()
        self.steps = steps

    @torch.no_grad()  # as diffusers pipelines decorate __call__
    def __call__(self, text_embeddings: torch.Tensor) -> torch.Tensor:
        latents = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(1234))
        for step in range(self.steps):
            noise = self.unet(latents, step, encoder_hidden_states=text_embeddings).sample
            latents = latents - 0.1 * noise  # a scheduler step
        return self.vae.decode(latents / 0.18215).sample


def diffusion_pipeline() -> tuple[DiffusionPipeline, torch.Tensor, None]:
    """The `DiffusionPipeline` and a (1, 4, 16) text embedding, profiled by calling the pipeline."""
    return DiffusionPipeline(), torch.randn(1, 4, 16, generator=torch.Generator().manual_seed(1)), None


WORKLOADS: dict[str, Callable[[], tuple[Any, torch.Tensor, Any]]] = {
    "llama": llama_decoder,
    "t5": t5_encoder_decoder,
    "bert": bert_encoder,
    "diffusion": diffusion_pipeline,
}
"""Every builder by name."""
