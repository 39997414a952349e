"""Whole ``pmc.sample_smc(backend="jax")`` runs on one machine, under several model-call
budgets and on both of JAX's devices, alternating, so that the comparison is within a machine.

    python benchmarks/gpu_run_budgets.py --json OUT.json [--reps 2] [--rows 1e6] [--small-rows 768]

Each run is ``benchmarks/bench_bigdata.py``'s worker in a fresh interpreter (each compiles its
shapes afresh): 2 chains batched, 256 particles, seed 1, on a logistic regression with d = 20.
Runs at ``--rows`` on the GPU under each of ``--budgets`` (``memory_budget``; ``default`` is
1 GiB: blocks of 5 particles at 10⁶ rows; 5.6e10 is half of what JAX may use of an H200,
blocks of 291), each with the calls padded (what the samplers do
with JAX on an accelerator) and not (the worker switches the padding off), ``--reps`` times,
alternating; then one run at ``--small-rows`` on the GPU and one on the CPU
(``JAX_PLATFORMS=cpu``). Written for the GPU machine (docs/scale.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_bigdata  # the worker and its fresh-interpreter runner
from gpu_check import CPU_ENV, GPU_ENV

KEEP = ("device", "budget_mb", "wall_s", "sampling_s", "n_logp_evals", "log_z", "mcse",
        "peak_rss_mb", "device_peak_mb", "error")


def main(argv=None) -> list:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", required=True)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--rows", type=float, default=1e6)
    p.add_argument("--small-rows", type=float, default=768, help="0: none")
    p.add_argument("--budgets", default="default,5.6e10",
                   help="memory_budget of the big runs, comma-separated ('default': None)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per run")
    a = p.parse_args(argv)
    plan = []
    budgets = [None if b == "default" else float(b) for b in a.budgets.split(",")]
    for _ in range(a.reps):
        plan += [("gpu", a.rows, b, pad) for b in budgets for pad in (True, False)]
    if a.small_rows:
        plan += [("gpu", a.small_rows, None, True), ("cpu", a.small_rows, None, True)]
    out = []
    for device, rows, budget, pad in plan:
        spec = {"kind": "run", "rows": int(rows), "dim": 20, "particles": 256,
                "backend": "jax", "chains": 2, "memory_budget": budget, "pad": pad}
        rec = bench_bigdata.run_one(spec, a.timeout, env=CPU_ENV if device == "cpu" else GPU_ENV)
        row = {"asked": device, "rows": int(rows), "memory_budget": budget, "pad": pad,
               **{k: rec.get(k) for k in KEEP if k in rec}}
        out.append(row)
        print(json.dumps(row), flush=True)
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return out


if __name__ == "__main__":
    main()
