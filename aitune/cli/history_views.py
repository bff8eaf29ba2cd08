"""Terminal views (rich) of the history: a check's verdicts, trends as sparklines, the ledger.

Pure functions from the history's records to renderables; every stored string goes through `terminal_text`.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group
from rich.table import Table
from rich.text import Text

from aitune.history.check import RowVerdict
from aitune.history.gate import CheckResult
from aitune.history.ledger import LedgerRow
from aitune.history.store import TrendPoint, Workload
from aitune.history.trend import sparkline, top_paths, values_of
from aitune.report.formatting import MISSING, factor, ms, whole_percent
from aitune.report.safe_text import terminal_text


def check_view(result: CheckResult) -> Group:
    """One row per judged row: baseline and new medians, the ratio, the test's p, and the verdict."""
    table = Table(title=f"against {len(result.baseline)} stored run(s)", title_justify="left")
    for header in ("row", "baseline ms", "new ms", "ratio", "fastest", "p", "verdict"):
        table.add_column(header, justify="left" if header in ("row", "verdict") else "right")
    for verdict in result.verdicts:
        table.add_row(
            terminal_text(verdict.label),
            ms(verdict.baseline_us),
            ms(verdict.new_us),
            factor(verdict.ratio),
            factor(verdict.fast_ratio),
            MISSING if verdict.p_value is None else f"{verdict.p_value:.2g}",
            _verdict_word(verdict, result.enough),
        )
    lines: list[Text | Table] = [table]
    if result.other_machines:
        lines.append(Text(f"compared across machine kinds: {'; '.join(result.other_machines)}"))
    if result.steps:
        step = result.steps[-1]
        lines.append(
            Text(
                f"run time steps: the latest at stored point {step.index} of "
                f"{len(result.baseline) + 1}, {ms(step.before)} → {ms(step.after)}"
            )
        )
    rule = (
        f"a row regresses when its median and its fastest run are slower by more than "
        f"{whole_percent(result.threshold)} and "
        f"beyond the stored runs' spread, with Mann–Whitney p < {result.alpha:g}"
    )
    lines.append(Text(rule))
    return Group(*lines)


def _verdict_word(verdict: RowVerdict, enough: bool) -> str:
    if verdict.baseline_us is None:
        return "new"
    if not verdict.regressed:
        return "ok"
    return "REGRESSED" if enough else "slower (not judged)"


def trend_view(workload: Workload, points: Sequence[TrendPoint], top: int) -> Group:
    """The run time and the ``top`` largest rows of the latest run, each as a sparkline over ``points``."""
    title = f"{workload.label}: {len(points)} run(s) (workload {workload.workload}, machine {workload.machine})"
    table = Table()
    for header in ("row", "trend", "first ms", "latest ms"):
        table.add_column(header, justify="right" if header.endswith(" ms") else "left")
    for path in top_paths(points, top):
        values = values_of(points, path)
        present = [value for value in values if value is not None]
        table.add_row(terminal_text(path), sparkline(values), ms(present[0]), ms(present[-1]))
    return Group(terminal_text(title), table)


def ledger_view(rows: Sequence[LedgerRow]) -> Table:
    """Per backend and device: the bias and spread of predicted ÷ verified, and Kendall's τ."""
    table = Table(title="predicted ÷ verified end-to-end speedup", title_justify="left")
    for header in ("backend", "device", "n", "bias", "spread", "Kendall τ"):
        table.add_column(header, justify="left" if header in ("backend", "device") else "right")
    for row in rows:
        table.add_row(
            terminal_text(row.backend),
            terminal_text(row.device),
            str(row.count),
            factor(row.bias),
            factor(row.spread),
            MISSING if row.kendall_tau is None else f"{row.kendall_tau:+.2f}",
        )
    return table
