#!/usr/bin/env bash
# Wheels of what the GPU machine's image lacks for benchmarks/gpu_check.sh (docs/scale.md,
# "The GPU check"): PyMC, PyTensor, ArviZ and their pure-Python needs, at the versions of the
# interpreter $PYTHON (default: python3) so that the GPU run uses the code measured here.
# The image brings JAX with CUDA, NumPy, SciPy, pandas, Numba and the rest.
#
#   PYTHON=.venv/bin/python benchmarks/gpu_wheels.sh [DIR [MORE NAMES...]]   # DIR: .whl
#
# MORE NAMES are added to the list (e.g. numba llvmlite, if the image's Numba is newer than
# PyTensor accepts).
# Then carry DIR to the machine and install it there with --no-deps (docs/scale.md).
set -euo pipefail
dir="${1:-.whl}"
shift || true
py="${PYTHON:-python3}"
names=(pymc pytensor arviz arviz-base arviz-stats arviz-plots better-optimize cachetools xarray "$@")
pins=$("$py" - "${names[@]}" <<'PY'
import sys
from importlib.metadata import version
print(" ".join(f"{n}=={version(n)}" for n in sys.argv[1:]))
PY
)
mkdir -p "$dir"
# shellcheck disable=SC2086
"$py" -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d "$dir" $pins
du -sh "$dir"
