"""The one door for strings from a profile or a trace into a terminal, Markdown or the viewer's page:
they are data, never markup.

A profile may come from a stranger: a region name can hold escape sequences (cursor moves, a fake
green "OK", a new window title), rich markup (``[link=...]``), bidirectional overrides (U+202E shows
``gpj.exe`` as ``exe.jpg`` and reverses the figures after it), HTML and newlines that would break a
Markdown table, or thousands of characters that push every figure out of view. Every renderer
passes document text through these functions, the way templates pass values through one escape
function: `terminal_text` (rich), `markdown_text`, `html_text` (the viewer's HTML panes), and
`shown_name` for a name in a table cell or on a chart axis.
"""

from __future__ import annotations

import hashlib
import html
import re

from rich.text import Text

# C0 and C1 controls, DEL, and the Unicode line separators and bidirectional overrides that
# reorder or split what the reader sees.
_INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_MARKDOWN_SIGNIFICANT = re.compile(r"[\\|<>&`*\[\]]")
_HTML_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


def _shown(match: re.Match[str]) -> str:
    char = match.group()
    return _NAMED.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


def visible(text: object) -> str:
    """``text`` as a string whose control characters are spelled out: ``"\\x1b[2J"`` becomes ``"\\\\x1b[2J"``.

    Newlines and tabs are spelled out too: one value stays on one line.
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
