"""`suggest --ledger`: this machine's verified tunings correct the gain model's forecasts, and it says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import invoke_cli

from aitune.history.database import open_store
from aitune.history.ledger import Prediction
from aitune.history.record import digest, machine_fields
from aitune.report.io import load
from aitune.suggest import suggest
from aitune.suggest.correction import corrected_target

ROOT = Path(__file__).resolve().parent.parent
BEFORE = ROOT / "sample_traces" / "tuned-pipeline" / "before" / "profile.json"


def ledger_of(tmp_path: Path, *pairs: tuple[float, float], machine: str | None = None) -> str:
    """A history whose ledger holds these (predicted, verified) speedups on the sample's machine (or ``machine``)."""
    db = str(tmp_path / "history.db")
    found = [Prediction("onnxruntime", "cpu", f"region{i}", p, v) for i, (p, v) in enumerate(pairs)]
    with open_store(db) as store:
        store.add_predictions(None, machine or digest(machine_fields(load(BEFORE))), found)
    return db


def test_three_verified_tunings_that_ran_25_percent_high_divide_every_forecast(tmp_path):
    db = ledger_of(tmp_path, (1.25, 1.0), (2.5, 2.0), (1.5, 1.2))
    plain = {t["path"]: t["predicted_speedup"] for t in suggest(load(BEFORE)).to_dict()["targets"]}

    shown = invoke_cli("suggest", str(BEFORE), "--ledger", "--history-db", db, "--json")
    printed = invoke_cli("suggest", str(BEFORE), "--ledger", "--history-db", db)

    result = json.loads(shown.stdout)
    assert result["ledger_correction"] == {"bias": pytest.approx(1.25), "count": 3}
    for target in result["targets"]:
        assert target["predicted_speedup"] == pytest.approx(max(1.0, plain[target["path"]] / 1.25))
    assert "predictions divided by 1.25: this machine's ledger of 3 verified tuning(s)" in printed.stdout


def test_a_ledger_of_another_machine_or_too_few_tunings_changes_nothing_and_says_why(tmp_path):
    few = ledger_of(tmp_path / "few", (1.25, 1.0), (2.5, 2.0))
    elsewhere = ledger_of(tmp_path / "other", (1.25, 1.0), (2.5, 2.0), (1.5, 1.2), machine="another-machine")
    plain = suggest(load(BEFORE)).to_dict()

    for db, count in ((few, 2), (elsewhere, 0)):
        shown = invoke_cli("suggest", str(BEFORE), "--ledger", "--history-db", db, "--json")

        assert json.loads(shown.stdout) == json.loads(json.dumps(plain))
        assert shown.stderr == (
            f"ledger: {count} verified tuning(s) on this machine, fewer than 3: the predictions are the gain "
            "model's alone.\n"
        )


def test_a_corrected_target_keeps_its_region_and_end_to_end_forecasts_one_amdahl_pair():
    target = next(t for t in suggest(load(BEFORE)).targets if t.predicted_speedup > 1.05)

    fixed = corrected_target(target, 1.2)

    assert fixed.predicted_speedup == pytest.approx(target.predicted_speedup / 1.2)
    rest = (1 - fixed.share) + fixed.share / fixed.predicted_region_speedup
    assert 1 / rest == pytest.approx(fixed.predicted_speedup)
    assert corrected_target(target, 100.0).predicted_speedup == 1.0  # never a predicted slowdown
