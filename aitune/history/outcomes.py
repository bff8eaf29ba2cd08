"""A tune folder's predictions and verified outcomes, as the ledger's records."""

from __future__ import annotations

from aitune.compare.loop_report import TuneFolder
from aitune.history.ledger import Prediction
from aitune.report.model import UNSET, Profile, given


def device_of(profile: Profile) -> str:
    """The device a profile ran on: the first CUDA device's name, else ``cpu``."""
    environment = profile.environment
    devices = [] if environment is UNSET else given(environment.devices, [])
    return str(devices[0]) if devices else "cpu"


def predictions_of(folder: TuneFolder) -> list[Prediction]:
    """One record per region a backend won: suggest's predicted end-to-end speedup and the realised one
    (had only this region changed; None where it was not measured)."""
    device = device_of(folder.after)
    return [
        Prediction(gain.winner, device, gain.path, gain.predicted_speedup, gain.realised_speedup)
        for gain in folder.report.regions
        if gain.winner != "eager" and gain.predicted_speedup is not None
    ]
