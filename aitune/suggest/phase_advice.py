"""Advice per phase of a generate-like profile (`aitune.report.phases`): what dominates decode, and why.

Decode makes one token per call of the step region, so its bottlenecks differ from prefill's: a call
of one token that costs nearly as much as the prompt's call is dominated by its fixed cost per call
(operator dispatch, kernel launches, Python), not arithmetic; time between the steps is generate's
own work; a cost per token that grows along the sequence is attention over a growing cache; and a
step that re-reads the whole sequence has no cache at all. Every code has a row in docs/commands.md.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from itertools import pairwise

from msgspec import UNSET

from aitune.markers import region_path
from aitune.report.formatting import factor, ms, percent
from aitune.report.headline import phase_rows
from aitune.report.model import Profile, ProfileLike, Run, as_profile, given
from aitune.report.phases import phase_figures

DISPATCH_CALL_RATIO = 0.5
"""A decode call (one token) costing at least this fraction of the prefill call (the whole prompt) is dominated by
its fixed cost per call."""
OUTSIDE_STEPS_SHARE = 0.2
"""Time between the decode steps above this share of the decode phase earns a line."""
GROWTH_RATIO = 1.25
"""Later decode tokens this many times slower than the earlier ones earn a line."""


def phase_advice(doc: ProfileLike) -> Iterable[tuple[str, str, float, float]]:
    """(code, message, µs per run, share of the run) per finding about the decode phase; nothing for other profiles.

    ``doc`` goes to the report's phase helpers as given (a record or its JSON form); the rest is read from the
    typed record."""
    record = as_profile(doc)
    split = record.phase_split
    if split is UNSET or not {"decode", "prefill"} <= set(split.phases):
        return
    decode = next(figure for figure in phase_figures(doc) if figure.name == "decode")  # one per split phase
    step = split.step_region
    name = region_path(step)
    rows = {row.region_id: row for row in phase_rows(doc, "decode")}
    prefill_rows = {row.region_id: row for row in phase_rows(doc, "prefill")}
    lengths = _call_lengths(record, step)
    known = [length for length in lengths if isinstance(length, int)]
    cached = len(known) == len(lengths) > 1 and max(known[1:]) < known[0]  # decode calls take fewer tokens
    if cached and step in rows and step in prefill_rows and decode.steps:
        per_decode_call = statistics.median(rows[step].times_us) / decode.steps
        per_prefill_call = statistics.median(prefill_rows[step].times_us)
        ratio = per_decode_call / per_prefill_call if per_prefill_call > 0 else 0.0
        if ratio >= DISPATCH_CALL_RATIO:
            yield (
                "PHASE_DECODE_DISPATCH",
                f"each decode call of {name} takes {ms(per_decode_call)} ms for one token against "
                f"{ms(per_prefill_call)} ms for the {known[0]}-token prompt ({factor(ratio)}), and "
                f"decode is {percent(decode.share)} of the run: a decode step is dominated by its fixed cost per call "
                "(operator dispatch, kernel launches, Python), not arithmetic — capture the step as one graph "
                "(torch.compile with mode='reduce-overhead', CUDA graphs with a static cache) or batch more sequences.",
                statistics.median(rows[step].times_us),
                decode.share * rows[step].share,
            )
    residual = phase_rows(doc, "decode")[-1]
    if residual.share >= OUTSIDE_STEPS_SHARE:
        per_run = statistics.median(residual.times_us)
        yield (
            "PHASE_DECODE_OUTSIDE",
            f"between the decode calls of {name}, {ms(per_run)} ms a run ({percent(residual.share)} of decode) "
            "run outside every module: the loop's own work per token (sampling, logits processing, stopping checks, "
            "cache bookkeeping), which no module tuning touches; fewer, larger steps (batching) spread it.",
            per_run,
            decode.share * residual.share,
        )
    growths = [growth for growth in map(_growth, record.runs) if growth is not None]
    if growths and statistics.median(growths) >= GROWTH_RATIO:
        yield (
            "PHASE_DECODE_GROWING",
            f"later decode tokens take {factor(statistics.median(growths))} the earlier ones: the cost per token grows "
            "with the sequence (attention over a growing cache, or a cache re-allocated as it grows); a static, "
            "pre-allocated cache keeps each step the same shape, which compiled and graph-captured steps need.",
            decode.median_us,
            decode.share,
        )
    if len(lengths) > 1 and all(isinstance(a, int) and isinstance(b, int) and b == a + 1 for a, b in pairwise(lengths)):
        yield (
            "PHASE_NO_CACHE",
            f"each call of {name} reads the whole sequence again ({lengths[0]} → {lengths[-1]} tokens): no key/value "
            "cache, so every decode step redoes the prompt's work; pass use_cache=True (and past_key_values).",
            decode.median_us,
            decode.share,
        )


def _call_lengths(record: Profile, region_id: str) -> list[int | None]:
    """The tokens each call of the region took (its ``regions`` entry's ``call_lengths``); [] where not recorded."""
    lengths = next((given(meta.call_lengths, None) for meta in record.regions if meta.id == region_id), None)
    return lengths or []


def _growth(run: Run) -> float | None:
    """The run's growth of the time per decode token (`aitune.report.model.TimePerToken`); None where absent."""
    if run.generation is UNSET or run.generation.time_per_output_token_us is UNSET:
        return None
    return given(run.generation.time_per_output_token_us.growth, None)
