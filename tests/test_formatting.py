"""One style for every figure a reader sees: `aitune.report.formatting` writes each time, share and factor,
and no other module formats one inline."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from aitune.report.formatting import factor, fine_factor, ms, ms_change, percent, whole_percent

PACKAGE = Path(__file__).resolve().parent.parent / "aitune"
FORMATTING = PACKAGE / "report" / "formatting.py"
# analysis/ runs before report/ and may not import it: its warnings keep their own figures until the
# formatting module moves below both (issue 38).
UPSTREAM_OF_REPORT = PACKAGE / "analysis"
NUMBER_SPEC = re.compile(r"[+,_ ]*(\.\d+)?[efg%]")


def test_a_share_has_one_decimal_in_a_table_and_none_in_a_sentence():
    assert (percent(0.4504), whole_percent(0.4504)) == ("45.0%", "45%")


def test_a_factor_has_two_decimals_and_three_where_two_would_read_one():
    assert (factor(1.0042), fine_factor(1.0042)) == ("1.00×", "1.004×")


def test_a_time_is_milliseconds_grouped_and_a_change_carries_its_sign():
    assert (ms(1_763_921.4), ms_change(-1_250_000), ms_change(None)) == ("1,763.921", "-1,250.000", "-")


def inline_figures(source: str) -> list[str]:
    """The f-string fields of ``source`` that format a share (``:.1%``), a factor (``:.2f}×``, ``×{…:.2f}``)
    or a time in milliseconds (``{us / 1000:.3f}``, ``{…:.3f} ms``) themselves."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.JoinedStr):
            continue
        parts = node.values
        for index, part in enumerate(parts):
            if not isinstance(part, ast.FormattedValue) or part.format_spec is None:
                continue
            spec = "".join(p.value for p in part.format_spec.values if isinstance(p, ast.Constant))
            if not NUMBER_SPEC.fullmatch(spec):
                continue
            before = _literal(parts, index - 1)
            after = _literal(parts, index + 1)
            share = spec.endswith("%")
            if share or after.startswith(("×", " ms")) or before.endswith("×") or _in_milliseconds(part.value):
                found.append(f"line {part.lineno}: {{{ast.unparse(part.value)}:{spec}}}")
    return found


def _in_milliseconds(value: ast.expr) -> bool:
    """``us / 1000``: microseconds turned into milliseconds by hand (``/ 1e3`` is a size in kB)."""
    divisor = value.right if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Div) else None
    return isinstance(divisor, ast.Constant) and type(divisor.value) is int and divisor.value == 1000


def _literal(parts: list[ast.expr], index: int) -> str:
    if 0 <= index < len(parts) and isinstance(parts[index], ast.Constant):
        return str(parts[index].value)
    return ""


@pytest.mark.parametrize(
    "source",
    [
        'f"{share:.1%} of the run"',
        'f"{speedup:.3f}× faster"',
        'f"µs figures ×{scale:.2f}"',
        'f"{time_us / 1000:,.3f} a run"',
        'f"{time:.1f} ms"',
    ],
)
def test_the_scan_finds_an_inline_figure(source):
    assert inline_figures(source)


@pytest.mark.parametrize(
    "source",
    [
        'f"{percent(share)} of the run"',
        'f"{factor(speedup)} faster"',
        'f"{ms(time_us)} ms a run"',
        'f"{size / 2**20:.0f} MB"',
        'f"{sync_us:,.0f} µs a run"',
        "f\"{argument} {'×'.join(map(str, shape))}\"",
    ],
)
def test_the_scan_leaves_other_figures_and_shapes_alone(source):
    assert inline_figures(source) == []


def test_no_module_formats_a_time_share_or_factor_outside_the_formatting_module():
    files = [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != FORMATTING and not path.is_relative_to(UPSTREAM_OF_REPORT)
    ]

    found = {str(path.relative_to(PACKAGE)): inline_figures(path.read_text()) for path in files}

    assert {path: sites for path, sites in found.items() if sites} == {}
