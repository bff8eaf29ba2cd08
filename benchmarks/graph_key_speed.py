"""Graph key and snapshot costs: what every tuned or recorded call pays to find its graph, and what recording
a stateful call costs.

Times, median of N repeats of many calls each: ``graph_key`` on a memo hit (every tuned call pays
it; target ~13 µs or less, as the pytree version took) for a plain tensor call and for a T5-style
decoder call (kwargs with a cache object); ``graph_key`` on a memo miss (encoding the structure);
``Sample.capture`` and ``Sample.fresh`` of the decoder call (a deep copy of its cache). Run it on a
quiet machine:

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/graph_key_speed.py [--repeats 7] [--calls 2000]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

from aitune.torch.graphs import graph_spec
from aitune.torch.graphs.graph_spec import Sample, graph_key


def per_call_us(call: Callable[[], Any], calls: int, repeats: int) -> float:
    """Median over ``repeats`` of the mean time of one call, in µs."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def decoder_call(layers: int = 2, length: int = 16) -> tuple[tuple[Any, ...], dict[str, Any]]:
    cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
    for layer in range(layers):
        cache.self_attention_cache.update(torch.randn(1, 4, length, 8), torch.randn(1, 4, length, 8), layer)
        cache.cross_attention_cache.update(torch.randn(1, 4, 12, 8), torch.randn(1, 4, 12, 8), layer)
    kwargs = {
        "input_ids": torch.ones(1, 1, dtype=torch.long),
        "attention_mask": None,
        "inputs_embeds": None,
        "cache": cache,
        "encoder_hidden_states": torch.randn(1, 12, 32),
        "encoder_attention_mask": None,
        "use_cache": True,
    }
    return (), kwargs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=2000)
    options = parser.parse_args()
    plain = ((torch.randn(4, 8),), {})
    decoder = decoder_call()
    sample = Sample.capture(*decoder)

    def miss() -> None:
        graph_spec._KNOWN_KEYS.clear()
        graph_key(*decoder)

    rows = [
        ("graph_key, memo hit, one tensor", lambda: graph_key(*plain), options.calls),
        ("graph_key, memo hit, T5 decoder kwargs", lambda: graph_key(*decoder), options.calls),
        ("graph_key, memo miss, T5 decoder kwargs", miss, options.calls // 10),
        ("Sample.capture, T5 decoder call", lambda: Sample.capture(*decoder), options.calls // 20),
        ("Sample.fresh, T5 decoder call", sample.fresh, options.calls // 20),
    ]
    for name, call, calls in rows:
        print(f"{name:<42} {per_call_us(call, max(calls, 1), options.repeats):10.1f} µs")


if __name__ == "__main__":
    main()
