#!/usr/bin/env bash
# Create (or reuse) .venv with Python >= 3.12 and install pymc_crais with the given extras.
# Usage: scripts/setup-venv.sh EXTRAS     (e.g. "test" or "plots")
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
extras=${1:-}
venv="${PYMC_CRAIS_VENV:-$here/.venv}"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then
  py=$("$here/scripts/find-python.sh")
  echo "pymc_crais: creating $venv with $py" >&2
  rm -rf "$venv"
  "$py" -m venv "$venv"
fi
log="$venv/pip-install.log"
spec="$here"
[ -n "$extras" ] && spec="$here[$extras]"
echo "pymc_crais: installing into $venv (log: $log)" >&2
if ! { "$venv/bin/python" -m pip install --upgrade pip && "$venv/bin/python" -m pip install -e "$spec"; } >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "pymc_crais: installation failed; the full log is $log" >&2
  exit 1
fi
echo "$venv"
