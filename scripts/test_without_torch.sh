#!/usr/bin/env bash
# Run the test suite where torch is not installed, as a maintainer reading a bug report would have it:
# a fresh virtual environment holding aitune (without its dependencies) and only its torch-free
# dependencies (pyproject.toml's, plus the viewer extra and pytest). Tests that need torch skip;
# every other test must pass. Browser and GPU tests are left to the usual run.
#
#   scripts/test_without_torch.sh [pytest arguments]      (venv: $AITUNE_NOTORCH_VENV, default .venv-notorch)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${AITUNE_NOTORCH_VENV:-.venv-notorch}"
PYTHON="${PYTHON:-python3}"

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
requirements=$("$VENV/bin/python" - <<'PY'
import tomllib

project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = project["optional-dependencies"]
wanted = project["dependencies"] + extras["viewer"] + [dep for dep in extras["dev"] if dep.startswith("pytest")]
print(" ".join(dep for dep in wanted if not dep.startswith("torch")))
PY
)
# shellcheck disable=SC2086  # one argument per requirement
"$VENV/bin/pip" install --quiet $requirements
"$VENV/bin/pip" install --quiet --no-deps -e .
if "$VENV/bin/python" -c "import torch" 2>/dev/null; then
    echo "torch is installed in $VENV; this run needs an environment without it." >&2
    exit 2
fi
exec "$VENV/bin/python" -m pytest -m "not browser and not gpu" -p no:cacheprovider -rfEs "$@"
