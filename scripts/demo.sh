#!/usr/bin/env bash
# The main job on the bundled example: `aitune-profile capture` profiles examples/pipeline_app.py's
# infer() and writes profile.json, profile.md and a gzipped Chrome trace into demo_out/ (or the
# folder given as $1), then prints where the time goes and where the files are.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
out="${1:-demo_out}"
# capture refuses a folder that already holds a profile: the demo writes its own three files anew each time.
rm -f "$out/profile.json" "$out/profile.md" "$out/trace.json.gz"
.venv/bin/aitune-profile capture examples/pipeline_app.py:infer --input input_data --out "$out"
