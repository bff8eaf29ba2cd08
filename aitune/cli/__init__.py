"""The ``aitune-profile`` command line (Typer): thin commands over capture, report, compare and bundle."""

from aitune.cli.app import app, main

__all__ = ["app", "main"]
