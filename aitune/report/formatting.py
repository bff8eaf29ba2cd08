"""How every reader writes a figure: times in milliseconds, shares of the run, speedups with their interval.

One style for the terminal (`aitune.cli`), the Markdown (`aitune.report.markdown`) and the viewer
(`aitune.viewer`), so a number reads the same wherever it is shown:

- a time is milliseconds with three decimals, digits grouped: ``1,763.921``;
- a share of the run is a percentage with one decimal: ``45.0%``; in a sentence that argues from it
  (a reason, a piece of advice) the whole percent: ``45%`` (`whole_percent`);
- a speedup is before ÷ after (above 1: faster) with two decimals, its 95% interval in brackets
  after it: ``1.29× [1.20, 1.38]``; compare's ratios (after ÷ before) are turned into speedups
  (`aitune.compare.gains.speedup`) before they are shown (`factor`); a factor close to 1, where two
  decimals would read ``1.00×``, has three (`fine_factor`);
- a spread (the lowest to the highest measured value, not an interval) joins its ends with a dash:
  ``1,757.590–1,789.540``.

A missing figure is ``-``. The viewer's table cells format numbers in the browser: `numeral` gives
them the same decimals in numeral.js's pattern.
"""

from __future__ import annotations

MISSING = "-"
MS_DECIMALS = 3
SHARE_DECIMALS = 1
SPEEDUP_DECIMALS = 2
FINE_FACTOR_DECIMALS = 3


def ms(value_us: float | None) -> str:
    """Microseconds as milliseconds: ``1,763.921``; ``-`` when absent."""
    return MISSING if value_us is None else f"{value_us / 1000:,.{MS_DECIMALS}f}"


def ms_change(delta_us: float | None) -> str:
    """A change in time, in milliseconds with its sign: ``+1.250``, ``-0.500``; ``-`` when absent."""
    return MISSING if delta_us is None else f"{delta_us / 1000:+,.{MS_DECIMALS}f}"


def ms_spread(low_us: float, high_us: float) -> str:
    """The lowest to the highest of measured times, in milliseconds: ``1,757.590–1,789.540``."""
    return f"{ms(low_us)}–{ms(high_us)}"


def percent(fraction: float | None) -> str:
    """A fraction (of the run, of a region) as a percentage: ``45.0%``; ``-`` when absent."""
    return MISSING if fraction is None else f"{fraction:.{SHARE_DECIMALS}%}"


def whole_percent(fraction: float) -> str:
    """A fraction in a sentence that argues from it, to the whole percent: ``45%``."""
    return f"{fraction:.0%}"


def factor(value: float | None, low: float | None = None, high: float | None = None) -> str:
    """A ratio (a speedup, an imbalance, an overhead) as ``1.29×``, with its interval ``[1.20, 1.38]`` when both
    ends are known; ``-`` when there is none.

    >>> factor(1.2912, 1.2, 1.38)
    '1.29× [1.20, 1.38]'
    """
    if value is None:
        return MISSING
    interval = "" if low is None or high is None else f" [{low:.{SPEEDUP_DECIMALS}f}, {high:.{SPEEDUP_DECIMALS}f}]"
    return f"{value:.{SPEEDUP_DECIMALS}f}×{interval}"


def fine_factor(value: float) -> str:
    """A factor close to 1 (a bound, a small predicted gain) with three decimals, where two would read ``1.00×``:
    ``1.004×``."""
    return f"{value:.{FINE_FACTOR_DECIMALS}f}×"


def bar_verdict(
    precision: str, label: str, value: float | None, minimum: float, *, unit: str = "", inputs: int = 1
) -> str:
    """A quality figure against its bar, as the task gate judged it: ``int8: top-1 agreement 0.94 < 0.99,
    refused`` or ``bf16: token agreement 1.00 ≥ 0.99``; two decimals, more where two would show the figure
    equal to a bar it misses; ``over N inputs`` when there were several; ``-`` and "not judged" without a figure.

    >>> bar_verdict("int8", "top-1 agreement", 0.9896, 0.99)
    'int8: top-1 agreement 0.9896 < 0.9900, refused'
    >>> bar_verdict("bf16", "PSNR", 41.5, 30, unit="dB", inputs=3)
    'bf16: PSNR 41.50 ≥ 30.00 dB over 3 inputs'
    """
    over = f" over {inputs} inputs" if inputs > 1 else ""
    if value is None:
        return f"{precision}: {label} {MISSING}{over}, not judged"
    decimals = next((d for d in range(2, 7) if f"{value:.{d}f}" != f"{minimum:.{d}f}"), 6)
    sign, verdict = ("≥", "") if value >= minimum else ("<", ", refused")
    suffix = f" {unit}" if unit else ""
    return f"{precision}: {label} {value:.{decimals}f} {sign} {minimum:.{decimals}f}{suffix}{over}{verdict}"


def numeral(decimals: int, *, grouped: bool = False, percent: bool = False) -> str:
    """The numeral.js pattern the viewer's table cells format with: ``numeral(2)`` is ``0.00``."""
    whole = "0,0" if grouped else "0"
    return whole + ("." + "0" * decimals if decimals else "") + ("%" if percent else "")


def si(value: float | None, unit: str) -> str:
    """``value`` with an SI prefix (``1.23 G`` + unit); ``-`` when absent."""
    if value is None:
        return MISSING
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {prefix}{unit}"
    return f"{value:.0f} {unit}"
