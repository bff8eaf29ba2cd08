"""The bug-report bundle: a zip of a profile, its Markdown, its environment block and its trace (no torch).

Redacted: absolute paths under a home folder become ``~``, and user and host names become
``<user>``/``<host>`` (the Chrome trace's own ``host_name`` included); the profile never holds
environment variables. Reproducible: the same inputs give the same bytes (sorted entries, fixed
timestamps and permissions, a gzip without file name or time).
"""

from __future__ import annotations

import getpass
import gzip
import io
import re
import socket
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

import orjson

from aitune.errors import BundleError
from aitune.report.document import ProfileDoc
from aitune.report.io import dumps
from aitune.report.markdown import render_markdown
from aitune.report.memo import computed_once
from aitune.report.model import as_profile, given, json_form

MAX_BUNDLE_MB = 25.0
"""Default size limit: what common issue trackers accept as one attachment."""

_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
_HOME_PATTERNS = (
    re.compile(r"(?:/home|/Users)/[^/\\\s\"']+"),
    re.compile(r"[A-Za-z]:\\Users\\[^\\/\s\"']+"),
)
_HOST_KEYS = frozenset({"host_name", "hostname", "host"})
_USER_KEYS = frozenset({"user", "user_name", "username"})


@dataclass(frozen=True)
class Redactor:
    """Rewrites strings so that no home folder, user name or host name is left in them."""

    homes: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()

    def text(self, value: str) -> str:
        """One string, redacted: homes first (they may contain the user name), then names as whole words."""
        for home in sorted(self.homes, key=len, reverse=True):
            # Only a path that starts with the home: a path that merely contains it further in is not under it.
            value = re.sub(rf"(?<![\w.~/-]){re.escape(home)}(?![\w.-])", "~", value)
        for pattern in _HOME_PATTERNS:
            value = pattern.sub("~", value)
        for names, placeholder in ((self.users, "<user>"), (self.hosts, "<host>")):
            for name in names:
                value = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", placeholder, value)
        return value

    def value(self, data: Any) -> Any:
        """A JSON value with every string redacted and every host/user-name field blanked."""
        if isinstance(data, str):
            return self.text(data)
        if isinstance(data, list):
            return [self.value(item) for item in data]
        if isinstance(data, Mapping):
            return {self.text(str(key)): self._field(str(key), item) for key, item in data.items()}
        return data

    def _field(self, key: str, item: Any) -> Any:
        if isinstance(item, str) and key in _HOST_KEYS:
            return "<host>"
        if isinstance(item, str) and key in _USER_KEYS:
            return "<user>"
        return self.value(item)


def local_redactor(trace: Mapping[str, Any] | None = None) -> Redactor:
    """A redactor for this machine's home, user and host names, plus the host named inside ``trace``."""
    host = socket.gethostname()
    hosts = {host, host.split(".")[0], *_trace_hosts(trace)}
    return Redactor(
        homes=(str(Path.home()),),
        users=_names([getpass.getuser()]),
        hosts=_names(hosts),
    )


def _trace_hosts(trace: Mapping[str, Any] | None) -> set[str]:
    """The host name torch writes at the top of a Chrome trace (2.13 does, 2.11 does not), when it holds one."""
    host = None if trace is None else trace.get("host_name")
    return {host} if isinstance(host, str) else set()


def _without_saved_path(trace: Mapping[str, Any]) -> Mapping[str, Any]:
    """``trace`` with its ``traceName``, where torch writes the absolute path it saved the trace to, cut to the
    file name."""
    saved = trace.get("traceName")
    return {**trace, "traceName": PurePath(saved).name} if isinstance(saved, str) else trace


HtmlRenderer = Callable[[ProfileDoc], str]
"""Renders the single-file HTML report of a document (the CLI passes `aitune.cli.pages.profile_page`)."""

HTML_NAME = "report.html"
TRACE_NAME = "trace.json.gz"


@computed_once()  # the Markdown and the HTML report read the same headline rows
def bundle_entries(
    doc: ProfileDoc, trace: Mapping[str, Any] | None, redactor: Redactor, html: HtmlRenderer | None = None
) -> dict[str, bytes]:
    """The archive's files by name: profile, Markdown, environment, README, the gzipped trace if given, and
    the HTML report of the redacted document if ``html`` renders one."""
    clean: ProfileDoc = redactor.value(doc)
    entries = {
        "profile.json": dumps(clean),
        "profile.md": render_markdown(clean).encode(),
        "environment.json": dumps(_environment(clean)),
        "README.txt": _readme(trace is not None, html is not None).encode(),
    }
    if html is not None:
        entries[HTML_NAME] = html(clean).encode()
    if trace is not None:
        entries[TRACE_NAME] = gzip.compress(orjson.dumps(redactor.value(_without_saved_path(trace))), mtime=0)
    return entries


def _environment(doc: ProfileDoc) -> dict[str, Any]:
    """The document's environment block as JSON ({} when it has none), read through the typed record."""
    return json_form(given(as_profile(doc).environment, {}))


def zip_bytes(entries: Mapping[str, bytes]) -> bytes:
    """A zip of ``entries`` whose bytes depend on nothing but the entries (sorted, fixed time and mode)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in sorted(entries):
            info = zipfile.ZipInfo(name, date_time=_ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            info.create_system = 3  # Unix, whatever the writing machine: the mode bits above mean the same
            archive.writestr(info, entries[name])
    return buffer.getvalue()


def check_size(archive: bytes, entries: Mapping[str, bytes], max_mb: float) -> None:
    """Raise `BundleError` naming the biggest entry when ``archive`` is over ``max_mb`` megabytes."""
    size_mb = len(archive) / 1e6
    if size_mb <= max_mb:
        return
    biggest = max(entries, key=lambda name: len(entries[name]))
    hint = "bundle without --trace, or capture fewer runs" if biggest == TRACE_NAME else "capture fewer runs"
    raise BundleError(
        f"the bundle would be {size_mb:.1f} MB, over the {max_mb:g} MB limit ({biggest} is "
        f"{len(entries[biggest]) / 1e6:.1f} MB); {hint}, or raise --max-mb."
    )


def build_bundle(
    doc: ProfileDoc,
    trace: Mapping[str, Any] | None = None,
    *,
    redactor: Redactor | None = None,
    max_mb: float = MAX_BUNDLE_MB,
    html: HtmlRenderer | None = None,
) -> bytes:
    """The redacted, size-checked, reproducible bug-report zip of ``doc`` (and ``trace``, and its HTML report)."""
    entries = bundle_entries(doc, trace, redactor or local_redactor(trace), html)
    archive = zip_bytes(entries)
    check_size(archive, entries, max_mb)
    return archive


def _names(candidates: Iterable[str]) -> tuple[str, ...]:
    # One- and two-letter names would turn ordinary words into placeholders.
    return tuple(sorted({name for name in candidates if len(name) >= 2}))


def _readme(with_trace: bool, with_html: bool = False) -> str:
    lines = [
        "aitune bug-report bundle.",
        "View it: `aitune-profile report profile.json` (terminal) or read profile.md;",
        "validate it: `aitune-profile validate profile.json`.",
    ]
    if with_html:
        lines.append(f"{HTML_NAME} is the same report for any browser: it opens offline, with no script.")
    if with_trace:
        lines.append(f"{TRACE_NAME} is the Chrome trace: open it in https://ui.perfetto.dev or chrome://tracing.")
    lines.append("Paths under the home folder were replaced by ~, user and host names by <user> and <host>.")
    return "\n".join(lines) + "\n"
