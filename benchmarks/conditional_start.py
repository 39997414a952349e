"""Is ``pmc.sample_smc()``'s error bar honest where it takes the conditional-Laplace start?

    python benchmarks/conditional_start.py [--cases applied_hier60_centred,...] [--seeds 101-106]
        [--chains 4] [--off] [--json PATH]

Each (case, seed) runs ``pmc.sample_smc(model, chains, cores=1, random_seed=seed,
progressbar=False)`` with its defaults in a fresh subprocess (``--off``: with
``conditional_start=False``, the rules without the start) and prints the error against the
case's exact reference, the MCSE, ``z = error / MCSE``, the wall time, the start chosen and
its pilot's k̂, and whether the run warned. Per case: the mean and RMS of ``z`` (an honest
error bar gives about 0 and 1) and the median wall time. ``--json`` appends one record per
run (JSON lines).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CASES = (
    "applied_hier60_centred,applied_hier60_noncentred,applied_random_slopes,"
    "applied_local_level,applied_ar1,applied_multilevel_logistic,applied_bugs_oneway"
)


def one(case: str, seed: int, chains: int, off: bool) -> dict:
    import time
    import warnings

    import pymc_crais as pmc
    from pymc_crais.validation import get_case

    inst = get_case(case).build()
    t = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        idata = pmc.sample_smc(model=inst.model, chains=chains, cores=1, random_seed=seed,
                               progressbar=False, conditional_start=not off)  # fmt: skip
    wall = time.perf_counter() - t
    lz, se = pmc.log_marginal_likelihood(idata)
    a = idata["sample_stats"].attrs
    k = [a.get("init_conditional_pareto_k", np.nan), a.get("init_conditional_pareto_k_refit", np.nan)]
    return {
        "case": case, "seed": seed, "chains": chains, "off": off, "error": lz - inst.log_z,
        "mcse": se, "wall_s": wall, "init_choice": a.get("init_choice"),
        "pilot_khat": float(np.nanmin(k)) if np.isfinite(k).any() else None,
        "hyper": a.get("init_conditional_hyper"),
        "warned": sorted({w.category.__name__ for w in caught if "Unreliable" in w.category.__name__}),
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=CASES)
    ap.add_argument("--seeds", default="101-106")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--off", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--_worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._worker:
        case, seed = args._worker.split(":")
        print(json.dumps(one(case, int(seed), args.chains, args.off)))
        return
    lo, _, hi = args.seeds.partition("-")
    seeds = range(int(lo), int(hi or lo) + 1)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for case in args.cases.split(","):
        recs = []
        for seed in seeds:
            cmd = [sys.executable, __file__, "--_worker", f"{case}:{seed}", "--chains", str(args.chains)]
            cmd += ["--off"] if args.off else []
            out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
            rec = json.loads(out.stdout.strip().splitlines()[-1])
            recs.append(rec)
            print(f"{case} seed {seed}: {rec['error']:+.4f} ± {rec['mcse']:.4f} (z {rec['error'] / rec['mcse']:+.2f}), "
                  f"{rec['wall_s']:.1f} s, {rec['init_choice']}, k̂ {rec['pilot_khat']}, warned {rec['warned']}", flush=True)  # fmt: skip
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(rec) + "\n")
        z = np.array([r["error"] / r["mcse"] for r in recs])
        walls = [r["wall_s"] for r in recs]
        print(f"{case}: mean z {z.mean():+.2f}, RMS z {np.sqrt(np.mean(z**2)):.2f}, "
              f"max |error| {max(abs(r['error']) for r in recs):.3f}, max MCSE "
              f"{max(r['mcse'] for r in recs):.3f}, median wall {np.median(walls):.1f} s", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
