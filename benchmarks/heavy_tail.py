"""Calibrate the heavy-tail factor on the within-chain variance of log Ẑ against Pareto k̂.

    python benchmarks/heavy_tail.py [--reps 2000] [--json out.json]

Importance weights are simulated from two families whose tails k̂ sees differently:
generalized Pareto ``w = 1 + (U^{-k} − 1)/k`` (tail index k, mean ``(2−k)/(1−k)``) and
log-normal ``w = exp(s·Z)`` (mean ``exp(s²/2)``, all moments finite but heavy at small N).
For N in {250, 1000, 4000} and a grid of k or s, each replicate gives
``log Ẑ = log mean(w)``, the delta-method variance ``v = 1/ESS − 1/N`` and the
estimated k̂ (``pymc_crais.diagnostics.pareto_khat``). Replicates are binned by k̂; in each
bin the factor ``f`` such that ``|log Ẑ − log Z| ≤ 2·sqrt(f·v)`` holds for 95 % of the
replicates is reported (the worse family decides). Nothing here depends on a model.
"""

from __future__ import annotations

import argparse
import json

import numpy as np


import itertools

from pymc_crais.diagnostics import heavy_tail_factor, pareto_khat


def simulate(reps: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    rows = []
    for n in (250, 1000, 4000):
        for fam, grid in (
            ("gpd", np.linspace(0.0, 0.8, 9)),
            ("lognormal", np.linspace(0.5, 3.0, 11)),
        ):
            for p in grid:
                for _ in range(reps):
                    u = rng.random(n)
                    if fam == "gpd":
                        lw = np.log((u ** (-p) - 1.0) / p + 1.0) if p > 0 else np.log1p(-np.log(u))
                        true = np.log((2.0 - p) / (1.0 - p))
                    else:
                        lw = p * rng.standard_normal(n)
                        true = 0.5 * p * p
                    m = lw.max()
                    w = np.exp(lw - m)
                    est = m + np.log(w.mean())
                    v = max(np.sum(w * w) / np.sum(w) ** 2 - 1.0 / n, 0.0)
                    rows.append((fam, n, float(p), pareto_khat(lw), float(est - true), v))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    rows = simulate(args.reps)
    fam = np.array([r[0] for r in rows])
    k = np.array([r[3] for r in rows])
    err = np.array([r[4] for r in rows])
    v = np.array([r[5] for r in rows])
    edges = [-np.inf, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, np.inf]
    print("| k̂ bin | family | runs | coverage ±2√v | needed f (95 %) | coverage ±2√(f(k̂)v) |")
    print("|---|---|---|---|---|---|")
    out = []
    for lo, hi in itertools.pairwise(edges):
        for f in ("gpd", "lognormal"):
            sel = (fam == f) & (k > lo) & (k <= hi) & (v > 0)
            if sel.sum() < 50:
                continue
            ratio = err[sel] ** 2 / (4.0 * v[sel])
            need = float(np.quantile(ratio, 0.95))
            cov = float(np.mean(ratio <= 1.0))
            cov_f = float(np.mean(ratio <= heavy_tail_factor(k[sel])))
            print(
                f"| ({lo:.1f}, {hi:.1f}] | {f} | {sel.sum()} | {cov:.1%} | {need:.2f} | {cov_f:.1%} |"
            )
            out.append(
                {
                    "lo": lo,
                    "hi": hi,
                    "family": f,
                    "n": int(sel.sum()),
                    "coverage": cov,
                    "needed_factor": need,
                    "coverage_corrected": cov_f,
                }
            )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
