#!/usr/bin/env bash
# The main job on the bundled example: profile examples/pipeline_app.py and write profile.json,
# profile.md and a gzipped Chrome trace into demo_out/ (or the folder given as $1).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/python examples/demo.py --out "${1:-demo_out}"
