"""``aitune.torch.wrap`` finds modules by the profile's dotted paths and writes the wrappers back in place."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import aitune.torch as ait
from aitune.errors import TuningError


class Pipeline:
    """A plain pipeline object holding modules in an attribute, a ModuleList and a ModuleDict."""

    def __init__(self) -> None:
        self.encoder = nn.Linear(4, 4)
        self.unet = nn.Module()
        self.unet.blocks = nn.ModuleList([nn.ReLU(), nn.Tanh()])
        self.heads = nn.ModuleDict({"text": nn.Linear(4, 2)})


def test_wrap_writes_wrappers_into_attribute_list_index_and_dict_key():
    pipe = Pipeline()
    originals = (pipe.encoder, pipe.unet.blocks[1], pipe.heads["text"])

    wrappers = ait.wrap(pipe, ["encoder", "unet.blocks.1", "heads.text"])
    try:
        assert list(wrappers) == ["encoder", "unet.blocks.1", "heads.text"]
        placed = (pipe.encoder, pipe.unet.blocks[1], pipe.heads["text"])
        assert all(isinstance(w, ait.Module) for w in placed)
        assert [w.module for w in placed] == list(originals)
        assert [w.name for w in placed] == ["encoder", "unet.blocks.1", "heads.text"]
    finally:
        ait.unwrap(pipe, list(wrappers))

    assert (pipe.encoder, pipe.unet.blocks[1], pipe.heads["text"]) == originals
    assert not any(isinstance(m, ait.Module) for m in originals)


def test_wrapped_list_entries_are_called_by_their_parent():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    x = torch.randn(2, 4)
    expected = model(x)
    wrappers = ait.wrap(model, "0")
    try:
        wrappers["0"].enable_recording()

        assert torch.equal(model(x), expected)
        assert len(wrappers["0"].graph_specs) == 1
    finally:
        ait.unwrap(model, "0")


def test_a_bad_path_names_itself_and_leaves_nothing_wrapped():
    pipe = Pipeline()

    with pytest.raises(TuningError, match=r"nothing at 'unet.blocks.7' \(ModuleList has no '7'\); check the path"):
        ait.wrap(pipe, ["encoder", "unet.blocks.7"])

    assert not isinstance(pipe.encoder, ait.Module)


def test_a_path_to_something_that_is_not_a_module_is_refused():
    pipe = Pipeline()
    pipe.steps = 4

    with pytest.raises(TuningError, match="'steps' is int, not a module to wrap"):
        ait.wrap(pipe, "steps")
