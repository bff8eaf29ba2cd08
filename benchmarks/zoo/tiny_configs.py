"""The tiny random-weight configs the zoo's apps and the tests' Hugging Face workloads share (no downloads).

Sizes are chosen for a busy 2-core CPU: a forward takes about a millisecond, yet every layer kind of
the family runs (attention, feed-forward, normalisation, the cache of an encoder-decoder).
"""

from __future__ import annotations

from typing import Any

VOCAB = 96


def t5_config(**overrides: Any) -> Any:
    """A 2 + 2-layer T5 with ``d_model`` 32."""
    from transformers import T5Config

    return T5Config(
        **{
            "vocab_size": VOCAB,
            "d_model": 32,
            "d_kv": 8,
            "d_ff": 64,
            "num_layers": 2,
            "num_decoder_layers": 2,
            "num_heads": 4,
            "pad_token_id": 0,
            "eos_token_id": 1,
            "decoder_start_token_id": 0,
            **overrides,
        }
    )


def bert_config(**overrides: Any) -> Any:
    """A 2-layer BERT with hidden size 32."""
    from transformers import BertConfig

    return BertConfig(
        **{
            "vocab_size": VOCAB,
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "intermediate_size": 64,
            "max_position_embeddings": 64,
            **overrides,
        }
    )


DECODER = {
    "vocab_size": VOCAB,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,  # grouped-query attention: two query heads per key/value head
    "max_position_embeddings": 64,
    "pad_token_id": 0,
}
"""The shape a Llama-style decoder's config shares with its Mixtral-style sibling."""


def llama_config(**overrides: Any) -> Any:
    """A 2-layer Llama-style decoder with hidden size 32 and grouped-query attention."""
    from transformers import LlamaConfig

    return LlamaConfig(**{**DECODER, "bos_token_id": 1, "eos_token_id": 2, **overrides})


def mixtral_config(**overrides: Any) -> Any:
    """The same decoder with a mixture of 4 experts in each layer, each token routed to 2."""
    from transformers import MixtralConfig

    return MixtralConfig(**{**DECODER, "num_local_experts": 4, "num_experts_per_tok": 2, **overrides})
