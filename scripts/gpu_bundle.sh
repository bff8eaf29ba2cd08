#!/usr/bin/env bash
# The wheels the lent GPU image lacks, for scripts/gpu_check.sh to install there without a registry.
# The image (Python 3.12, torch 2.11) has torch, numpy, wrapt, typer, rich, onnx, onnxruntime and
# pytest, but not orjson or msgspec; their wheels and dependencies go into build/gpu-wheels/,
# which must fit in the 64 MiB a device run may carry (the viewer's panel and bokeh are not needed).
#   scripts/gpu_bundle.sh [DIR]     # default build/gpu-wheels
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build/gpu-wheels}
limit_bytes=$((64 * 1024 * 1024))
rm -rf "$dir"
mkdir -p "$dir"
python3 -m pip download --quiet --disable-pip-version-check --python-version 3.12 \
    --platform manylinux2014_x86_64 --only-binary=:all: -d "$dir" orjson msgspec
bytes=$(du -sb "$dir" | cut -f1)
echo "gpu_bundle: $(find "$dir" -name '*.whl' | wc -l) wheels, $((bytes / 1024)) KiB in $dir (carry limit 65536 KiB)"
ls "$dir"
if [ "$bytes" -ge "$limit_bytes" ]; then
    echo "gpu_bundle: $dir is over the 64 MiB a device run may carry; leave out what the image has." >&2
    exit 1
fi
