"""Shared fixtures: the bundled example app, and a guard that nothing stays registered between tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))


@pytest.fixture(autouse=True)
def registry_is_left_empty():
    """Every test leaves the process-wide module registry as it found it."""
    from aitune.torch.registry import MODULE_REGISTRY

    before = {entry.region for entry in MODULE_REGISTRY}
    yield
    after = {entry.region for entry in MODULE_REGISTRY}
    assert after == before, f"test left modules registered: {sorted(after - before)}"
