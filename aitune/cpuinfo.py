"""This machine's CPU as Linux's /proc/cpuinfo describes its first processor: its model name and its feature
flags (no torch). The one reader of that file: read once, bounded, and empty where it does not exist (macOS)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
MAX_CPUINFO_BYTES = 4 * 2**20  # a 512-core machine's cpuinfo is about 1 MB; the first processor's lines count


@cache
def first_processor() -> dict[str, str]:
    """The ``key: value`` lines of the first processor that lists each key (an empty dict without the file)."""
    try:
        with CPUINFO.open("rb") as file:
            text = file.read(MAX_CPUINFO_BYTES).decode("ascii", "replace")
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, colon, value = line.partition(":")
        if colon:
            fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_flags() -> frozenset[str]:
    """The instruction sets the CPU has (``flags`` on x86, ``Features`` on Arm); empty where cpuinfo says none."""
    fields = first_processor()
    return frozenset((fields.get("flags") or fields.get("Features") or "").split())


def cpu_model() -> str:
    """The CPU's model name (``model name``), or "" where cpuinfo gives none (Arm, macOS)."""
    return first_processor().get("model name", "")
