"""Numbers on the command line: NaN, infinities, negatives and a meaningless zero are one sentence and exit 2."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from aitune.cli.app import app

runner = CliRunner()


def refusal(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stderr


@pytest.mark.parametrize("value", ["nan", "-5", "0", "inf", "-inf"])
def test_tune_refuses_a_time_budget_that_is_not_a_positive_finite_number(value):
    code, stderr = refusal("tune", "app.py:infer", "--time-budget", value)

    assert code == 2
    assert stderr == (
        f"[error] --time-budget takes a finite number of seconds above 0 (got {float(value):g}), "
        "e.g. --time-budget 600.\n"
    )


@pytest.mark.parametrize(("flag", "value"), [("--top", "0"), ("--top", "-1"), ("--record", "0")])
def test_tune_refuses_counts_below_one(flag, value):
    code, stderr = refusal("tune", "app.py:infer", flag, value)

    assert code == 2
    assert stderr.startswith("[error] --top and --record must be at least 1")


@pytest.mark.parametrize("value", ["nan", "inf", "-1e-3", "1e-3,nan"])
def test_tune_refuses_a_tolerance_that_is_not_finite_and_at_least_zero(value):
    code, stderr = refusal("tune", "app.py:infer", "--tolerance", value)

    assert code == 2
    assert stderr.startswith("[error] --tolerance takes one or two finite numbers of at least 0")


def test_suggest_refuses_top_zero(tmp_path):
    code, stderr = refusal("suggest", str(tmp_path / "missing.json"), "--top", "0")

    assert (code, stderr) == (2, "[error] --top must be at least 1 (got 0); leave it out to list every target.\n")


@pytest.mark.parametrize("value", ["nan", "0", "-1", "inf"])
def test_bundle_refuses_a_size_limit_that_is_not_a_positive_finite_number(value, tmp_path):
    code, stderr = refusal("bundle", str(tmp_path / "p.json"), "-o", str(tmp_path / "b.zip"), "--max-mb", value)

    assert code == 2
    assert stderr.startswith("[error] --max-mb takes a finite number of megabytes above 0")
    assert not (tmp_path / "b.zip").exists()


def test_the_help_says_the_time_budget_bounds_the_whole_command():
    result = runner.invoke(app, ["tune", "--help"], env={"COLUMNS": "200"})

    assert "Bound the whole command" in " ".join(result.stdout.split())
