#!/usr/bin/env bash
# Create .venv and install aitune with what the demo and the tests need.
# torch is pinned by constraints.txt to the CPU build this machine's pip serves; an unpinned torch
# would pull a multi-GB CUDA build onto a CPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev,viewer,onnx]'
