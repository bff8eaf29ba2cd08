#!/usr/bin/env bash
# The project's GPU checks in one run (see scripts/gpu_check.py): device-time attribution, the tuning
# backends on CUDA (torch.compile, ONNX Runtime CUDA EP; TensorRT skipped where it is missing), the
# closed loop, and capture overhead. Uses .venv when present, else the machine's python3.
# Where that python lacks orjson or msgspec (the GPU image does, and reaches no registry), the
# wheels of build/gpu-wheels (scripts/gpu_bundle.sh, built here and carried there) are installed into
# a throwaway folder, from that folder alone. Writes gpu_check.json, gpu_check.md and gpu_check.log in OUT_DIR.
#   scripts/gpu_check.sh [--dry-run] OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: scripts/gpu_check.sh [--dry-run] OUT_DIR" >&2; exit 2; }
out=${!#}
python=python3
[ -x .venv/bin/python ] && python=.venv/bin/python
path="$PWD"
mkdir -p "$out"
: >"$out/gpu_check.log"
if ! "$python" -c "import orjson, msgspec" 2>/dev/null; then
    if [ ! -d build/gpu-wheels ]; then
        echo "gpu_check: $python lacks orjson or msgspec; run scripts/gpu_bundle.sh and carry build/gpu-wheels." >&2
        exit 2
    fi
    site=$(mktemp -d)
    trap 'rm -rf "$site"' EXIT
    "$python" -m pip install --quiet --disable-pip-version-check --no-index --find-links build/gpu-wheels \
        --target "$site" orjson msgspec
    path="$path:$site"
    echo "gpu_check: installed the $(ls build/gpu-wheels | wc -l) carried wheels into a throwaway folder" |
        tee -a "$out/gpu_check.log"
fi
PYTHONPATH="$path${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 "$python" scripts/gpu_check.py "$@" 2>&1 |
    tee -a "$out/gpu_check.log"
