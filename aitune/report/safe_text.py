"""The one door for strings from a profile or a trace into a terminal, Markdown or the viewer's page:
they are data, never markup.

A profile may come from a stranger: a region name can hold escape sequences (cursor moves, a fake
green "OK", a new window title), rich markup (``[link=...]``), bidirectional overrides (U+202E shows
``gpj.exe`` as ``exe.jpg`` and reverses the figures after it), zero-width characters (``un\u200bet`` reads
as ``unet`` but is another name), HTML and newlines that would break a
Markdown table, or thousands of characters that push every figure out of view. Every renderer
passes document text through these functions, the way templates pass values through one escape
function: `terminal_text` (rich), `markdown_text`, `html_text` (the viewer's HTML panes), `shown_name`
for a name in a table cell or on a chart axis, `chart_text` for one in a chart's title (Bokeh typesets what
stands between ``$$`` as mathematics), and `html_name` for a name placed in markup (an HTML report's cell,
a Tabulator column title, which the browser reads as HTML).
"""

from __future__ import annotations

import hashlib
import html
import re

from rich.text import Text

# C0 and C1 controls, DEL, the Unicode line separators, and every invisible format character (category Cf,
# as of Unicode 15.1): bidirectional overrides that reorder what the reader sees, and zero-width ones
# (U+200B, U+200D, U+FEFF, the soft hyphen, tags) that make ``un\u200bet`` read as ``unet``. Spelled out
# as a list rather than looked up per character: a test checks it against `unicodedata`.
_INVISIBLE = re.compile(
    "[\x00-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_TEX_DELIMITERS = re.compile(r"\$\$|\\[\[\]()]")  # Bokeh's: $$…$$, \[…\], \(…\)
_MARKDOWN_SIGNIFICANT = re.compile(r"[\\|<>&`*\[\]]")
_HTML_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


def _shown(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (
        f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
    )


def visible(text: object) -> str:
    """``text`` as a string whose control characters are spelled out: ``"\\x1b[2J"`` becomes ``"\\\\x1b[2J"``.

    Newlines and tabs are spelled out too: one value stays on one line; so are the invisible format
    characters (zero-width, bidi), as ``\\u200b`` (``\\U000e0041`` past the first plane).
    """
    return _INVISIBLE.sub(_shown, str(text))


def terminal_text(text: object, style: str = "") -> Text:
    """Document text for rich: never parsed as markup, control characters made visible."""
    return Text(visible(text), style=style)


def markdown_text(text: object) -> str:
    """Document text for a Markdown table cell or heading: one line, no HTML, no Markdown syntax.

    Pipes, backslashes, ``*``, backticks and brackets are backslash-escaped (``_`` is left alone:
    inside a word, as in ``untuned_module``, it never starts emphasis); ``<``, ``>`` and ``&``
    become entities, so no tag reaches a Markdown viewer.
    """
    return _MARKDOWN_SIGNIFICANT.sub(_markdown_escape, visible(text))


def _markdown_escape(match: re.Match[str]) -> str:
    char = match.group()
    return _HTML_ENTITIES.get(char) or "\\" + char


MAX_NAME_CHARS = 80
"""Longest name shown whole in a table cell, a chart's axis or a sentence of the viewer; longer ones are
cut (`shown_name`). The terminal's tables crop a cell to its column the same way."""


def shown_name(text: object, limit: int = MAX_NAME_CHARS) -> str:
    """A name from a document as one visible line of at most ``limit`` characters (plus a short tag).

    Control and bidi characters are spelled out (`visible`); a longer name keeps its start, and ends with
    ``…#`` and 6 hex digits of its hash, so two long names that share a start stay two labels (a chart's
    axis needs distinct factors).

    >>> shown_name("x" * 200, 10)
    'xxxxxxxxxx…#aa20c2'
    """
    spelled = visible(text)
    if len(spelled) <= limit:
        return spelled
    tag = hashlib.sha256(spelled.encode()).hexdigest()[:6]
    return f"{spelled[:limit]}…#{tag}"


def html_text(text: object) -> str:
    """Document text for an HTML pane: control and bidi characters spelled out (`visible`), then escaped,
    so no tag, entity or reordering reaches the page. Names inside it are cut by their writer (`shown_name`)."""
    return html.escape(visible(text))


def html_name(text: object, limit: int = MAX_NAME_CHARS) -> str:
    """A name for markup: cut and spelled out (`shown_name`), then escaped (`html_text`), as a table's cell or a
    Tabulator column's title needs it (Tabulator puts titles and their tooltips in the page as HTML)."""
    return html_text(shown_name(text, limit))


def chart_text(text: object, limit: int = MAX_NAME_CHARS) -> str:
    """A name for a chart's title or axis label: `shown_name`, with Bokeh's mathematics delimiters (``$$``,
    ``\\[``, ``\\(`` and their ends) spelled out as ``\\x24\\x24``, so a name is drawn as the characters it holds."""
    return _TEX_DELIMITERS.sub(_spelled_delimiter, shown_name(text, limit))


def _spelled_delimiter(match: re.Match[str]) -> str:
    return "".join(f"\\x{ord(char):02x}" for char in match.group())
