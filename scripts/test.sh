#!/usr/bin/env bash
# Install (see setup.sh), lint, then run the whole test suite. Extra arguments go to pytest.
#
# The suite runs on 2 pytest-xdist workers (AITUNE_TEST_WORKERS, default 2), one test file at a time
# (--dist loadfile): a file's tests keep their order on one worker, as the README examples need (a
# block reads what an earlier one wrote), and its module fixtures (a capture, a browser, a served
# viewer) are built once. Files with the most tests go first, so the small ones even out the end. `-n N`,
# `-n 0` or `-p no:xdist` among the arguments overrides this; a plain `pytest tests/test_x.py` runs
# in one process.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/ruff check .
workers=(-n "${AITUNE_TEST_WORKERS:-2}" --dist loadfile)
for arg in "$@"; do
    case "$arg" in
        -n | -n* | --numprocesses* | no:xdist | -pno:xdist) workers=() ;;
    esac
done
.venv/bin/python -m pytest ${workers[@]+"${workers[@]}"} "$@"  # an empty array is unset to bash < 4.4
