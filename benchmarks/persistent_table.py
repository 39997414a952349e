"""Persistent sampling against today's ``sample_smc`` at equal cost, from validate.py's records.

    python benchmarks/validate.py --samplers smc,smc_ps --seed 21 --chains 4 \\
        --results benchmarks/out/validate_persistent.json
    python benchmarks/persistent_table.py benchmarks/out/validate_persistent.json
    python benchmarks/mcse_coverage.py --seeds 30 --samplers smc,smc_ps --init prior \\
        --jsonl benchmarks/out/persistent_replicates_prior.jsonl
    python benchmarks/persistent_table.py --replicates benchmarks/out/persistent_replicates_prior.jsonl

Per case: each sampler's error, reported MCSE (``pmc.log_marginal_likelihood``: the
within-chain error for ``smc``, the chains' spread for ``smc_ps``), misses (validate.py's
rule; silent: without an UnreliableEvidenceWarning), model evaluations, and the
efficiency ratio ``(MCSE² × evaluations)_ps / (MCSE² × evaluations)_smc`` (below 1:
persistent sampling is cheaper at equal error). The ratio is given twice: with each
sampler's reported MCSE, and with the same estimator for both, the between-chain standard
error of the 4 chains (delta method, as ``combine_chain_estimates``'s ``mcse_between``),
which is noisy per case (3 degrees of freedom) but unbiased for both alike.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def between(lz) -> float:
    lz = np.asarray(lz, dtype=float)
    rel = np.exp(lz - lz.max())
    return float(np.std(rel, ddof=1) / (np.sqrt(lz.size) * rel.mean()))


def rows(recs: dict, base: str = "smc", other: str = "smc_ps"):
    by = {}
    for r in recs.values():
        if r.get("status") == "ok":
            by.setdefault(r["case"], {})[r["sampler"]] = r
    out = []
    for case, rs in by.items():
        if base not in rs or other not in rs:
            continue
        a, b = rs[base], rs[other]
        eff = (b["mcse"] ** 2 * b["evals"]) / (a["mcse"] ** 2 * a["evals"])
        eff_b = (between(b["log_z_chains"]) ** 2 * b["evals"]) / (
            between(a["log_z_chains"]) ** 2 * a["evals"]
        )
        out.append((case, a, b, eff, eff_b))
    return out


def replicate_table(path: str) -> None:
    """From ``mcse_coverage.py`` records of both samplers on the same seeds: per model, the
    spread of the errors over the seeds (not a reported MCSE) and ``SD² × mean
    evaluations``, persistent / ``smc``."""
    recs = [json.loads(line) for line in Path(path).read_text().splitlines() if line]
    print("| model | seeds | SD of error smc / PS | mean evals smc / PS | stages smc / PS | "
          "SD²·evals PS / smc | coverage ±2 MCSE smc / PS |")
    print("|---|---|---|---|---|---|---|")
    for case in sorted({r["case"] for r in recs}):
        a = [r for r in recs if r["case"] == case and r["sampler"] == "smc"]
        b = [r for r in recs if r["case"] == case and r["sampler"] == "smc_ps"]
        if not a or not b:
            continue
        sd = [np.std([r["error"] for r in x], ddof=1) for x in (a, b)]
        ev = [np.mean([r["evals"] for r in x]) for x in (a, b)]
        st = [np.mean([np.mean(r["n_stages"]) for r in x]) for x in (a, b)]
        cov = [np.mean([abs(r["error"]) <= 2 * r["mcse"] for r in x]) for x in (a, b)]
        print(f"| {case} | {len(a)} | {sd[0]:.4f} / {sd[1]:.4f} | {ev[0]:.3g} / {ev[1]:.3g} | "
              f"{st[0]:.1f} / {st[1]:.1f} | {sd[1] ** 2 * ev[1] / (sd[0] ** 2 * ev[0]):.2f} | "
              f"{cov[0]:.0%} / {cov[1]:.0%} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--replicates", action="store_true",
                    help="results is an mcse_coverage.py JSONL of smc and smc_ps on the same seeds")
    args = ap.parse_args(argv)
    if args.replicates:
        replicate_table(args.results)
        return
    recs = json.loads(Path(args.results).read_text())
    table = rows(recs)

    def miss(r):
        return "silent miss" if r.get("silent_miss") else "miss" if r.get("miss") else ""

    print("| case | smc error | smc MCSE | smc evals | PS error | PS MCSE | PS evals | "
          "misses (smc / PS) | MCSE²·evals PS / smc (reported) | (between-chain, both) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for case, a, b, eff, eff_b in table:
        print(f"| {case} | {a['error']:+.3f} | {a['mcse']:.3f} | {a['evals']:.3g} | "
              f"{b['error']:+.3f} | {b['mcse']:.3f} | {b['evals']:.3g} | "
              f"{miss(a) or '-'} / {miss(b) or '-'} | {eff:.2f} | {eff_b:.2f} |")
    effs = np.array([t[3] for t in table])
    effb = np.array([t[4] for t in table])
    ev = np.array([t[2]["evals"] / t[1]["evals"] for t in table])
    n_miss = [sum(bool(t[i].get("miss")) for t in table) for i in (1, 2)]
    n_silent = [sum(bool(t[i].get("silent_miss")) for t in table) for i in (1, 2)]
    print()
    print(f"cases: {len(table)}; misses smc {n_miss[0]} (silent {n_silent[0]}), "
          f"PS {n_miss[1]} (silent {n_silent[1]})")
    same = np.array([t[1]["log_z_chains"] == t[2]["log_z_chains"] for t in table])
    multi = ~same
    print(f"cases where both give the same log Ẑ_c (one stage, τ: 0 -> 1): {int(same.sum())}; "
          f"the other {int(multi.sum())}: median ratio reported {np.median(effs[multi]):.2f}, "
          f"between-chain for both {np.median(effb[multi]):.2f} (geometric mean "
          f"{np.exp(np.mean(np.log(effb[multi]))):.2f}); median evals ratio {np.median(ev[multi]):.2f}")
    print(f"median MCSE²·evals ratio PS/smc: reported {np.median(effs):.2f}, "
          f"between-chain for both {np.median(effb):.2f} (geometric mean {np.exp(np.mean(np.log(effb))):.2f}); "
          f"PS better (reported) on {int(np.sum(effs < 1))} of {effs.size}; "
          f"median evals ratio {np.median(ev):.2f}")


if __name__ == "__main__":
    main()
