"""Shared fixtures: the bundled example app, and guards that nothing stays registered or patched between tests."""

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


@pytest.fixture(autouse=True)
def jit_is_left_off():
    """JIT tuning's process-wide state (session, mode, ``nn.Module.__init__`` patch) is clean after every test."""
    import aitune.torch.jit as jit

    assert jit.is_clean(), "JIT tuning was already in use when the test started"
    yield
    assert jit.is_clean(), "test left JIT tuning in use; call aitune.torch.jit.reset() in its teardown"
