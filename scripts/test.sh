#!/usr/bin/env bash
# Install pymc_crais with its test and docs extras into .venv and run the default test suite
# (slow statistical runs are excluded; add `-m slow` to run them). The suite includes the
# strict documentation build (tests/test_docs.py) and the notebooks at small sizes
# (tests/test_notebooks.py). The tests run on every core (pytest-xdist, `-n auto`); the tests
# of one file share a worker (`--dist loadfile`), so each file's models are compiled once. Pass
# `-n 0` to run them in this process (e.g. under a debugger).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
venv=$("$here/scripts/setup-venv.sh" test,docs)
cd "$here"
exec "$venv/bin/python" -m pytest -n auto --dist loadfile "$@"
