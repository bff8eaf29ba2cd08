#!/usr/bin/env bash
# Install (see setup.sh), lint, then run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/python -m pytest "$@"
