#!/usr/bin/env bash
# Install (see setup.sh), lint, then run the whole test suite. Extra arguments go to pytest.
#
# The suite runs on 2 pytest-xdist workers (AITUNE_TEST_WORKERS, default 2) in worksteal mode: each
# worker starts on one contiguous half of the tests, so a module's fixtures are mostly built once,
# and a worker that runs dry takes tests from the other's queue, so the few long tests do not leave
# one core idle at the end. `-n N`, `-n 0` or `-p no:xdist` among the arguments overrides this; a
# plain `pytest tests/test_x.py` runs in one process.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/ruff check .
workers=(-n "${AITUNE_TEST_WORKERS:-2}" --dist worksteal)
for arg in "$@"; do
    case "$arg" in
        -n | -n* | --numprocesses* | no:xdist | -pno:xdist) workers=() ;;
    esac
done
.venv/bin/python -m pytest "${workers[@]}" "$@"
