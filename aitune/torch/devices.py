"""Where a module lives."""

from __future__ import annotations

import torch
from torch import nn


def module_device(module: nn.Module) -> torch.device:
    """The device of the module's first parameter or buffer; CPU for a module without any."""
    for tensor in (*module.parameters(), *module.buffers()):
        return tensor.device
    return torch.device("cpu")
