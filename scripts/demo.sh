#!/usr/bin/env bash
# Install pymc_crais into .venv and run the evidence demo on the bundled data.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
venv=$("$here/scripts/setup-venv.sh" plots)
exec "$venv/bin/pymc-crais" demo "$@"
