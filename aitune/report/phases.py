"""Readers of a generate-like document's phases (`aitune.analysis.phases`): each phase's time and share
over the runs, and the token figures (time to first token, per output token, tokens per second).

Every view (terminal, Markdown, viewer, compare, suggest) reads these; none recomputes them. A phase's
regions are read with `aitune.report.headline.phase_rows`.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from aitune.analysis.shares import median_share
from aitune.markers import region_path
from aitune.report.formatting import ms
from aitune.report.model import UNSET, Phase, PhaseSplit, ProfileLike, Run, as_profile, given


@dataclass(frozen=True)
class PhaseFigures:
    """One phase over the measured runs (a run without it counts 0)."""

    name: str
    times_us: list[float]
    fractions: list[float]  # of each run
    steps: int  # tokens made in it (the most any run made)

    @property
    def share(self) -> float:
        return median_share(self.fractions)

    @property
    def median_us(self) -> float:
        return statistics.median(self.times_us)


@dataclass(frozen=True)
class TokenFigures:
    """A generate-like document's token figures, one value per measured run (µs, tokens per second)."""

    output_tokens: int
    ttft_us: list[float]
    per_token_median_us: list[float]  # [] without decode steps
    per_token_p90_us: list[float]
    tokens_per_second: list[float]
    decode_tokens_per_second: list[float]


def phase_split(doc: ProfileLike) -> PhaseSplit | None:
    """The document's ``phase_split``; None when its runs are not generate-like."""
    split = as_profile(doc).phase_split
    return None if split is UNSET else split


def phase_names(doc: ProfileLike) -> list[str]:
    """The phases of the document's runs, in order ([] when not generate-like)."""
    split = phase_split(doc)
    return [] if split is None else list(split.phases)


def phase_figures(doc: ProfileLike) -> list[PhaseFigures]:
    """Each phase's time and share of the run, over the measured runs; [] when not generate-like."""
    record = as_profile(doc)
    found = []
    for name in phase_names(record):
        phases = [_phase(run, name) for run in record.runs]
        found.append(
            PhaseFigures(
                name=name,
                times_us=[0.0 if phase is None else phase.cpu_time_us for phase in phases],
                fractions=[0.0 if phase is None else phase.cpu_time_fraction for phase in phases],
                steps=max((0 if phase is None else phase.steps for phase in phases), default=0),
            )
        )
    return found


def token_figures(doc: ProfileLike) -> TokenFigures | None:
    """The token figures of every measured run that has them; None when none has."""
    record = as_profile(doc)
    runs = [run.generation for run in record.runs if run.generation is not UNSET]
    if not runs or record.phase_split is UNSET:
        return None
    per_token = [run.time_per_output_token_us for run in runs if run.time_per_output_token_us is not UNSET]
    return TokenFigures(
        output_tokens=max(run.output_tokens for run in runs),
        ttft_us=[run.ttft_us for run in runs],
        per_token_median_us=[figure.median for figure in per_token],
        per_token_p90_us=[figure.p90 for figure in per_token],
        tokens_per_second=[run.tokens_per_second for run in runs],
        decode_tokens_per_second=[
            run.decode_tokens_per_second for run in runs if run.decode_tokens_per_second is not UNSET
        ],
    )


def median_or_none(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def split_line(doc: ProfileLike) -> str | None:
    """How the runs were split, in the words every reader shows; None when not generate-like."""
    split = as_profile(doc).phase_split
    if split is UNSET:
        return None
    where = "" if split.within is UNSET else f" under {region_path(split.within)}"
    return (
        f"phases {', '.join(split.phases)}: one token per call of {region_path(split.step_region)}{where} "
        f"(decided by {split.method.replace('_', ' ')}: {split.basis})"
    )


def tokens_line(doc: ProfileLike) -> str | None:
    """``4 tokens · time to first token 5.443 ms · per output token 2.310 ms (p90 2.356 ms) · 325.3 tokens/s``
    (medians over the runs); None when not generate-like."""
    figures = token_figures(doc)
    if figures is None:
        return None
    parts = [f"{figures.output_tokens} token(s)", f"time to first token {ms(median_or_none(figures.ttft_us))} ms"]
    if figures.per_token_median_us:
        median, p90 = median_or_none(figures.per_token_median_us), median_or_none(figures.per_token_p90_us)
        parts.append(f"per output token {ms(median)} ms (p90 {ms(p90)} ms)")
    parts.append(f"{median_or_none(figures.tokens_per_second):,.1f} tokens/s")
    if figures.decode_tokens_per_second:
        parts.append(f"decode {median_or_none(figures.decode_tokens_per_second):,.1f} tokens/s")
    return " · ".join(parts)


def _phase(run: Run, name: str) -> Phase | None:
    return next((phase for phase in given(run.phases, []) if phase.name == name), None)
