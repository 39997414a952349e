#!/usr/bin/env bash
# Install pymc_crais with its test extras into .venv and run the default test suite
# (slow statistical runs are excluded; add `-m slow` to run them).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
venv=$("$here/scripts/setup-venv.sh" test)
cd "$here"
exec "$venv/bin/python" -m pytest "$@"
