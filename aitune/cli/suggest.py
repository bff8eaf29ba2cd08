"""``suggest``: the regions of a saved profile worth tuning, ranked, optionally corrected by the ledger."""

from __future__ import annotations

import sys
from pathlib import Path

from aitune.cli.console import console
from aitune.cli.edge import fail


def print_suggestions(
    profile: Path,
    *,
    top: int | None,
    domain: str | None,
    scenario: str | None,
    precision: str | None,
    ledger: bool,
    history_db: str | None,
    as_json: bool,
) -> None:
    """Rank the regions of ``profile`` worth tuning and print them (as JSON with ``as_json``)."""
    from aitune.cli.render import suggestions_view
    from aitune.report import load
    from aitune.suggest import suggest as suggest_targets

    if top is not None and top < 1:
        fail(f"--top must be at least 1 (got {top}); leave it out to list every target.")
    doc = load(profile)
    suggestions = suggest_targets(doc, top=top, domain=domain, scenario=scenario, precision=precision)
    if ledger:
        from aitune.cli.history import ledger_correction
        from aitune.suggest.correction import corrected

        correction, why_not = ledger_correction(doc, history_db)
        if correction is not None:
            suggestions = corrected(suggestions, correction)
        else:
            print(why_not, file=sys.stderr)
    if as_json:
        from aitune.cli import outputs

        outputs.print_json(suggestions.to_dict())
    else:
        console.print(suggestions_view(suggestions))
