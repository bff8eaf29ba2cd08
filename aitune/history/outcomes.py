"""A tune folder's predictions and verified outcomes, as the ledger's records."""

from __future__ import annotations

from aitune.compare.loop_report import TuneFolder
from aitune.history.ledger import Prediction


def device_of(environment: dict) -> str:
    """The device a profile ran on: the first CUDA device's name, else ``cpu``."""
    devices = environment.get("devices") or []
    return str(devices[0]) if devices else "cpu"


def predictions_of(folder: TuneFolder) -> list[Prediction]:
    """One record per region a backend won: suggest's predicted end-to-end speedup and the realised one
    (had only this region changed; None where it was not measured)."""
    device = device_of(folder.after.get("environment") or {})
    return [
        Prediction(gain.winner, device, gain.path, gain.predicted_speedup, gain.realised_speedup)
        for gain in folder.report.regions
        if gain.winner != "eager" and gain.predicted_speedup is not None
    ]
