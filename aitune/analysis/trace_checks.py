"""A Chrome trace's shape, checked before it is read: the document, aitune's metadata in it, and the words
for a malformed event (no numpy: the command line checks a trace without loading the analysis)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aitune.errors import ProfileError
from aitune.markers import OPERATOR_RUN_WALLS_KEY, PLAIN_WALLS_KEY, TRACE_METADATA_KEY

_WALL_TIMES = ("run_wall_times_us", "warmup_wall_times_us", OPERATOR_RUN_WALLS_KEY, PLAIN_WALLS_KEY)
_METADATA_SHAPE = {
    **dict.fromkeys(("created_at", "aitune_version"), str),
    **dict.fromkeys(("config", "target", "input", "environment", "profiler", "memory"), dict),
    **dict.fromkeys(("regions", "warnings", *_WALL_TIMES), list),
}
_METADATA_ITEMS = {
    **dict.fromkeys(("regions", "warnings"), dict),
    **dict.fromkeys(_WALL_TIMES, (int, float)),
}


def check_trace(raw: Any, name: str) -> dict[str, Any]:
    """``raw`` when it is a Chrome trace document (an object with a ``traceEvents`` list); `ProfileError`
    naming ``name`` otherwise."""
    if not isinstance(raw, dict) or not isinstance(raw.get("traceEvents"), list):
        raise ProfileError(f"{name}: not a Chrome trace (no traceEvents list).")
    return raw


def checked_metadata(metadata: Any) -> Mapping[str, Any]:
    """The trace's aitune metadata when the keys analysis reads have the right types; `ProfileError` otherwise."""
    where = f"the trace's {TRACE_METADATA_KEY!r} metadata"
    if not isinstance(metadata, Mapping):
        raise ProfileError(f"{where} is {type(metadata).__name__}, not an object; re-export the trace.")
    for key, kind in _METADATA_SHAPE.items():
        value = metadata.get(key)
        item_kind = _METADATA_ITEMS.get(key)
        if value is not None and (
            not isinstance(value, kind) or (item_kind and not all(isinstance(item, item_kind) for item in value))
        ):
            raise ProfileError(f"{where}: {key!r} has the wrong type ({str(value)[:40]!r}); re-export the trace.")
    if not all(isinstance(region.get("id"), str) for region in metadata.get("regions") or ()):
        raise ProfileError(f"{where}: every entry of 'regions' needs a string 'id'; re-export the trace.")
    return metadata


_EVENT_FIELDS = (("name", str), ("cat", str), ("ts", (int, float)), ("dur", (int, float)), ("args", dict))


def what_is_wrong(raw: Any) -> str:
    """Which field of a malformed event is wrong, in words; only called once a read has failed."""
    if not isinstance(raw, dict):
        return f"an event must be an object, not {type(raw).__name__}"
    if "ts" not in raw:
        return "a complete event needs a 'ts'"
    for key, kinds in _EVENT_FIELDS:
        if key in raw and not isinstance(raw[key], kinds):
            return f"{key!r} is {type(raw[key]).__name__} {str(raw[key])[:40]!r}"
    for key in ("pid", "tid"):
        if isinstance(raw.get(key), (list, dict)):
            return f"{key!r} must be a number or a string"
    return f"args.correlation must be an integer, not {str(raw['args'].get('correlation'))[:40]!r}"
