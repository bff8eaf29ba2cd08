#!/usr/bin/env bash
# The project's GPU checks in one run (see scripts/gpu_check.py): device-time attribution, the tuning
# backends on CUDA (torch.compile, ONNX Runtime CUDA EP, TensorRT), and capture overhead.
# Installs nothing: uses .venv when present, else the machine's python3 with this checkout on PYTHONPATH.
#   scripts/gpu_check.sh [--dry-run] OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
python=python3
[ -x .venv/bin/python ] && python=.venv/bin/python
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 exec "$python" scripts/gpu_check.py "$@"
