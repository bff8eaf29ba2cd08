"""aitune: a profiler-first analysis toolkit for PyTorch inference.

The torch-free core (``aitune.analysis``, ``aitune.report``) reads and renders profile documents;
everything that imports torch lives under ``aitune.torch``.
"""

__version__ = "0.1.0"
