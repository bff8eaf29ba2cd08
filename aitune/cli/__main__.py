"""``python -m aitune.cli``: the same as the ``aitune-profile`` console script."""

from aitune.cli.app import main

main()
