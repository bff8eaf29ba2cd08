"""A full disk is never turned into a rejected candidate: no fallback can fix it, so the user sees it."""

from __future__ import annotations

import errno

import pytest
import torch

import aitune.torch as ait
from aitune.errors import is_out_of_disk

from .conftest import FAST_MEASURE, DiskFullBackend, tiny_mlp


def test_out_of_disk_is_found_anywhere_in_the_cause_chain():
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as cause:
            raise RuntimeError("export failed") from cause
    except RuntimeError as error:
        wrapped = error

    assert is_out_of_disk(wrapped)
    assert not is_out_of_disk(OSError(errno.EACCES, "Permission denied"))


def test_a_backend_running_out_of_disk_stops_tuning_and_leaves_the_module_working(wrapped):
    wrapper = wrapped(tiny_mlp(), name="mlp")
    wrapper.enable_recording()
    x = torch.randn(2, 8)
    expected = wrapper(x)

    with pytest.raises(RuntimeError, match="export failed"):
        wrapper.tune(strategy=ait.OneBackendStrategy(DiskFullBackend(), measure=FAST_MEASURE))

    assert wrapper.state is ait.ModuleState.RECORDING
    assert torch.equal(wrapper(x), expected)
