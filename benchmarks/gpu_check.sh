#!/usr/bin/env bash
# The GPU check (docs/scale.md, "The GPU check"): JAX on the CPU against JAX on the GPU, one JSON.
#
#   benchmarks/gpu_check.sh [OUT.json] [--quick] [--budget-s 300] [--chains 2] [--big-rows 1e6]
#
# OUT.json defaults to benchmarks/out/gpu_check.json. The Python interpreter is $PYTHON
# (default: python3); it needs pymc_crais's dependencies and JAX (with CUDA on a GPU machine).
# benchmarks/gpu_check.py gives each part the time left of --budget-s (default 300 s) and
# rewrites the JSON after each part; this wrapper stops the whole check 20 s after that.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$repo/benchmarks/out/gpu_check.json"
if [[ $# -gt 0 && $1 != -* ]]; then
    out="$(realpath -m "$1")"
    shift
fi
budget=300
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    case "${args[i]}" in
        --budget-s) budget="${args[i + 1]:-300}" ;;
        --budget-s=*) budget="${args[i]#--budget-s=}" ;;
    esac
done
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
cd "$repo"
limit=$(( ${budget%.*} + 20 ))
timeout --kill-after=5 "$limit" "${PYTHON:-python3}" benchmarks/gpu_check.py --json "$out" "$@"
echo "wrote $out"
