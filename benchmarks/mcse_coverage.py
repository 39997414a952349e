"""Coverage of ±2 MCSE and the rate of UnreliableEvidenceWarning over replicate seeds.

    python benchmarks/mcse_coverage.py --seeds 30 [--cases normal_mean,...] [--samplers ais,crais,smc,rts]
                                  [--chains 4] [--jsonl runs.jsonl] [--summary] [--init prior]

Every public sampler runs with its defaults (only ``chains``, ``cores=1``, the seed and
``progressbar=False`` set) on the models with exact log Z of ``pymc_crais/validation/testing.py``
(and the silent-failure cases of issue 13 with ``--cases d50_regression,mixture10``), or on
any case of the validation suite by its name (``--cases linreg_d10,eight_schools_centered``).
Each run appends one JSON line with the per-chain ``log Ẑ_c``, within-chain variances,
Pareto k̂, genealogy and move correlations, the combined estimate and MCSE, the MCSE the
previous rule (``max(within, t·between)``) would have given, and the warnings raised, so
that estimators can be compared on the same runs. ``--summary`` prints the table of
docs/reliability.md from a JSONL file: per case and sampler, the runs, how many were
flagged (UnreliableEvidenceWarning), and the coverage of ``|log Ẑ − log Z| ≤ 2 MCSE`` among
the unflagged runs and among all runs, with the new and the previous MCSE.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

from pymc_crais.validation.testing import build_case

SAMPLERS = ("ais", "crais", "smc", "rts")  # and "smc_ps" (sample_smc(persistent=True)) on request
CASES = ("normal_mean", "beta_binomial", "linear_regression", "gaussian_mixture_potential")


def run(pmc, sampler: str, model, seed: int, chains: int, init=None):
    kw = {"model": model, "chains": chains, "cores": 1, "random_seed": seed, "progressbar": False}
    if init is not None:  # --init: e.g. "prior", for runs of many stages
        kw["init"] = init
    samplers = {"ais": pmc.sample_ais, "crais": pmc.sample_crais, "smc": pmc.sample_smc,
                "rts": pmc.sample_rts, "smc_ps": pmc.sample_smc}  # fmt: skip
    if sampler == "smc_ps":  # persistent sampling (its MCSE: the chains' spread only)
        kw["persistent"] = True
    return samplers[sampler](**kw)


def old_mcse(lz, v):
    """The previous combined MCSE: max(within, t_{0.975,C−1}/z_{0.975} · between)."""
    from scipy import stats

    lz, v = np.asarray(lz), np.asarray(v)
    p = np.exp(lz - lz.max())
    p = p / p.sum()
    within = np.sqrt(np.sum(p**2 * v))
    c = lz.size
    t = stats.t.ppf(0.975, c - 1) / stats.norm.ppf(0.975)
    rel = np.exp(lz - lz.max())
    return float(max(within, t * np.std(rel, ddof=1) / (np.sqrt(c) * rel.mean())))


def record(case, sampler, seed, idata, exact, caught, seconds) -> dict:
    import pymc_crais as pmc

    st = idata.sample_stats
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value, mcse, det = pmc.log_marginal_likelihood(idata, return_details=True)
    diag = pmc.diagnose(idata)
    lz = st["log_marginal_likelihood"].values.tolist()
    v = (st["log_marginal_likelihood_mcse"].values ** 2).tolist()
    return {
        "case": case,
        "sampler": sampler,
        "seed": seed,
        "exact": exact,
        "log_z": value,
        "mcse": mcse,
        "mcse_old": old_mcse(lz, v),
        "error": value - exact,
        "chain_log_z": lz,
        "chain_var": v,
        "pareto_k_final": st["pareto_k_final"].values.tolist(),
        "pareto_k_pooled": float(st.attrs.get("pareto_k_pooled", np.nan)),
        "table": diag.table.to_dict(orient="list"),
        "flags": diag.flags,
        "agreement_p": det["agreement_p_value"],
        "warnings": caught,
        "seconds": seconds,
        # model evaluations as validate.py counts them (chains plus run-level work)
        "evals": int(np.sum(st["n_logp_evals"].values))
        + sum(int(st.attrs.get(k, 0)) for k in ("n_logp_evals_tune", "n_logp_evals_pilot", "n_logp_evals_laplace", "n_logp_evals_refit")),
        "n_stages": st["n_stages"].values.tolist(),
    }


def summarize(path: str) -> None:
    with open(path) as fh:
        rows = [json.loads(line) for line in fh]
    keys = sorted({(r["case"], r["sampler"]) for r in rows}, key=lambda k: (k[0], k[1]))
    print(
        "| case | sampler | runs | flagged | flags | coverage unflagged (new MCSE) | "
        "coverage all (new) | coverage all (old max·t) | mean MCSE new / old | SD of error | "
        "misses > 3 MCSE unflagged |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for case, sampler in keys:
        rs = [r for r in rows if r["case"] == case and r["sampler"] == sampler]
        err = np.array([r["error"] for r in rs])
        new = np.array([r["mcse"] for r in rs])
        old = np.array([r["mcse_old"] for r in rs])
        flagged = np.array([bool(r["warnings"]) for r in rs])
        flags = sorted({f for r in rs for f in r["flags"]})
        ok = ~flagged
        cov_u = f"{np.mean(np.abs(err[ok]) <= 2 * new[ok]):.0%} ({ok.sum()})" if ok.any() else "-"
        miss = int(np.sum(np.abs(err[ok]) > 3 * new[ok]))
        print(
            f"| {case} | {sampler} | {len(rs)} | {flagged.sum()} | {','.join(flags) or '-'} | "
            f"{cov_u} | {np.mean(np.abs(err) <= 2 * new):.0%} | "
            f"{np.mean(np.abs(err) <= 2 * old):.0%} | {new.mean():.3g} / {old.mean():.3g} | "
            f"{err.std(ddof=1) if err.size > 1 else float('nan'):.3g} | {miss} |"
        )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--seed0", type=int, default=1000)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--samplers", default=",".join(SAMPLERS))
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--jsonl", default="coverage.jsonl")
    ap.add_argument("--init", default=None, help="init= of every run (default: the sampler's)")
    ap.add_argument("--summary", action="store_true", help="only summarize --jsonl")
    args = ap.parse_args(argv)
    if args.summary:
        summarize(args.jsonl)
        return
    import pymc_crais as pmc

    for case in args.cases.split(","):
        model, exact = build_case(case)
        for seed in range(args.seed0, args.seed0 + args.seeds):
            for sampler in args.samplers.split(","):
                t0 = time.perf_counter()
                with warnings.catch_warnings(record=True) as w:
                    warnings.simplefilter("always")
                    idata = run(pmc, sampler, model, seed, args.chains, args.init)
                caught = [
                    str(x.message).split("\n")[0]
                    for x in w
                    if issubclass(x.category, pmc.UnreliableEvidenceWarning)
                ]
                rec = record(case, sampler, seed, idata, exact, caught, time.perf_counter() - t0)
                with open(args.jsonl, "a") as fh:
                    fh.write(json.dumps(rec) + "\n")
                print(
                    f"{case} {sampler} seed {seed}: err {rec['error']:+.3f} mcse "
                    f"{rec['mcse']:.3f} (old {rec['mcse_old']:.3f}) flags {rec['flags']}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
