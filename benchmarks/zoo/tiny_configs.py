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
