"""The environment block of a profile: versions and devices, safe to attach to a bug report.

It never holds user names, host names, environment variables or paths.
"""

from __future__ import annotations

import os
import platform
from typing import Any

import torch

import aitune
from aitune.torch.calibration import cached_calibration


def environment() -> dict[str, Any]:
    """Python, OS, torch/CUDA/cuDNN versions, device names and thread counts of this process.

    A capture adds the gain model's figures itself (`profile_environment`); a plan or a tuning report
    records only this."""
    cuda = torch.cuda.is_available()
    env: dict[str, Any] = {
        "aitune_version": aitune.__version__,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "cpu_count": os.cpu_count() or 0,
        "torch": str(torch.__version__),  # a str subclass (TorchVersion) msgspec will not encode
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.version.cuda or "none",
        "cuda_available": cuda,
    }
    if cuda:
        env["cudnn"] = str(torch.backends.cudnn.version())
        env["devices"] = [torch.cuda.get_device_name(index) for index in range(torch.cuda.device_count())]
    return env


def profile_environment() -> dict[str, Any]:
    """`environment()` plus this machine's cached gain calibration (``gain_calibration``), when there
    is one: what a captured profile carries so that suggest, which never runs torch, predicts with this
    machine's figures."""
    env = environment()
    if (calibration := cached_calibration()) is not None:
        env["gain_calibration"] = calibration.to_dict()
    return env
