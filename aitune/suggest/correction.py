"""A machine's ledger applied to suggest's predictions: each predicted end-to-end speedup divided by the bias
its verified tunings showed (predicted ÷ verified, `aitune.history.ledger`), when there are enough of them.

The region's predicted speedup is recomputed from the corrected end-to-end one (Amdahl solved for the
region), so the two stay one forecast; a target is never predicted to slow the run (at least 1.0×).
"""

from __future__ import annotations

from dataclasses import replace

from aitune.suggest import LedgerCorrection, Suggestions, Target
from aitune.suggest.gain import UPPER_BOUND_CAP

MIN_VERIFIED = 3
"""Fewest verified tunings on a machine before its ledger corrects a prediction: one or two say little."""


def corrected_target(target: Target, bias: float) -> Target:
    """``target`` with its predicted end-to-end speedup divided by ``bias`` (at least 1.0×), and its region's
    predicted speedup the one that gives it (a region of half the run predicted at 1.5× end to end, with a
    bias of 1.2, becomes 1.25× end to end and 1.67× for the region)."""
    speedup = max(1.0, target.predicted_speedup / bias)
    rest = 1 / speedup - (1 - target.share)
    region = 1.0 if speedup <= 1.0 else (target.share / rest if rest > 0 else UPPER_BOUND_CAP)
    return replace(target, predicted_speedup=speedup, predicted_region_speedup=max(1.0, region))


def corrected(suggestions: Suggestions, correction: LedgerCorrection) -> Suggestions:
    """Every target corrected by the ledger's bias, in the same order; the correction recorded beside them."""
    targets = tuple(corrected_target(target, correction.bias) for target in suggestions.targets)
    return replace(suggestions, targets=targets, correction=correction)
