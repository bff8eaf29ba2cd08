"""The reduced precisions and the task gate's metrics with their ranges (no torch): the words the gate's bar and
verdict (`aitune.compare.quality`) and the compare report's model (`aitune.compare.report_model`) share."""

from __future__ import annotations

PRECISIONS = ("fp32", "bf16", "int8")
"""The precisions ``tune --precision`` takes; fp32 is the default and is never left implicitly."""

TOP1 = "top1_agreement"  # classification: share of decisions (argmax of the logits) unchanged
TOKENS = "token_agreement"  # greedy generate: share of token positions unchanged
PSNR = "psnr_db"  # images: peak signal-to-noise ratio in dB over the reference's range
COSINE = "cosine"  # embeddings and other float outputs: cosine similarity

METRICS: dict[str, tuple[float, float]] = {
    TOP1: (0.0, 1.0),
    TOKENS: (0.0, 1.0),
    PSNR: (0.0, 100.0),
    COSINE: (-1.0, 1.0),
}
"""Each metric's range: a bar outside it is refused; PSNR of identical images is reported as its top, 100 dB."""
