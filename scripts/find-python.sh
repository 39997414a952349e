#!/usr/bin/env bash
# Print the path of a working Python >= 3.12, or fail with a clear message.
# Order: $PYTHON, python3.12/python3.13/python3 on PATH, pyenv's installed versions.
set -u
ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; }
candidates=()
[ -n "${PYTHON:-}" ] && candidates+=("$PYTHON")
for name in python3.12 python3.13 python3.14 python3; do
  p=$(command -v "$name" 2>/dev/null) && candidates+=("$p")
done
if command -v pyenv >/dev/null 2>&1; then
  root=$(pyenv root 2>/dev/null)
  for d in "$root"/versions/3.1[2-9]*/bin/python3 "$root"/versions/3.[2-9]*/bin/python3; do
    [ -x "$d" ] && candidates+=("$d")
  done
fi
for d in "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3 /usr/local/bin/python3.1[2-9] /usr/bin/python3.1[2-9]; do
  [ -x "$d" ] && candidates+=("$d")
done
for c in "${candidates[@]}"; do
  # pyenv shims exist on PATH but refuse to run versions that are not selected: test by running.
  if ok "$c"; then
    real=$("$c" -c 'import sys; print(sys.executable)')
    echo "$real"
    exit 0
  fi
done
echo "pymc_crais needs Python >= 3.12 and none was found (tried: ${candidates[*]:-nothing})." >&2
echo "Install one (e.g. 'pyenv install 3.12') or set PYTHON=/path/to/python3.12." >&2
exit 1
