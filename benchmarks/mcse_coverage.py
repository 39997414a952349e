"""Coverage of ±2 MCSE and the rate of UnreliableEvidenceWarning over replicate seeds.

    python benchmarks/mcse_coverage.py --seeds 30 [--cases normal_mean,...] [--samplers ais,crais,smc,rts]
                                  [--chains 4] [--jsonl runs.jsonl] [--summary] [--init prior]

Every public sampler runs with its defaults (only ``chains``, ``cores=1``, the seed and
``progressbar=False`` set) on the models with exact log Z of ``tests/exact_models.py``
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
import os
import sys
import time
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # the repository root, so that ``tests`` imports as a package
    sys.path.insert(0, ROOT)

SAMPLERS = ("ais", "crais", "smc", "rts")  # and "smc_ps" (sample_smc(persistent=True)) on request
CASES = ("normal_mean", "beta_binomial", "linear_regression", "gaussian_mixture_potential")


def build_case(name: str):
    """``(model, exact log Z)`` of a named case."""
    from tests import exact_models as em

    if name == "d50_regression":  # issue 13: known noise, d = 50, n = 120
        c = em.linear_regression(n=120, d=50, sigma=1.0, prior_sd=1.0, seed=13)
    elif name == "mixture10":  # issue 13: 10-d mixture of 3 Gaussians as a Potential
        c = mixture_potential(10)
    elif name == "mixture10_unequal":  # the same with unequal widths, the narrowest heaviest
        c = mixture_potential(10, sds=(0.2, 0.5, 1.0), weights=(0.5, 0.3, 0.2))
    elif name == "mixture10_overlapping":  # x ~ N(0, I) times a 3-component mixture density
        c = overlapping_mixture(10)
    elif hasattr(em, name):
        c = getattr(em, name)()
    else:  # a case of the validation suite (pymc_crais.validation), exact or reference
        from pymc_crais.validation import get_case

        inst = get_case(name).build()
        return inst.model, inst.log_z
    return c.model, c.log_z


def mixture_potential(d: int = 10, sds=(0.5, 0.5, 0.5), weights=(0.2, 0.3, 0.5)):
    """Issue 13's case: a 10-d mixture of 3 well-separated Gaussians as the target, exact
    ``log Z = 0``. ``x ~ N(0, 2² I)`` and the Potential is ``log mix(x) − log N(x; 0, 2² I)``,
    so the posterior is the normalized mixture itself (means ``+2·1``, ``−2·1`` and
    alternating ``±2``, sd 0.5, weights 0.2/0.3/0.5: modes 25 sd apart)."""
    import pymc as pm
    import pytensor.tensor as pt

    from tests.exact_models import ExactModel

    w = np.asarray(weights, dtype=float)
    alt = np.where(np.arange(d) % 2 == 0, 2.0, -2.0)
    means = np.stack([np.full(d, 2.0), np.full(d, -2.0), alt])
    prior_sd = 2.0
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, prior_sd, shape=d)
        comps = [
            np.log(w[j]) + pm.logp(pm.Normal.dist(means[j], sds[j]), x).sum() for j in range(3)
        ]
        prior = pm.logp(pm.Normal.dist(0.0, prior_sd), x).sum()
        pm.Potential("mixture", pt.logsumexp(pt.stack(comps)) - prior)
    return ExactModel("mixture10", model, 0.0)


def overlapping_mixture(d: int = 10):
    """``x ~ N(0, I)`` times a Potential equal to a normalized 3-component mixture density
    (means −1, alternating ±1, +1; sds 0.3, 0.4, 0.5): ``Z = Σ_k w_k N(m_k; 0, (1 + s_k²) I)``."""
    import pymc as pm
    import pytensor.tensor as pt
    from scipy import special, stats

    from tests.exact_models import ExactModel

    w = np.array([0.2, 0.3, 0.5])
    means = np.stack([np.full(d, -1.0), np.zeros(d), np.full(d, 1.0)])
    means[1, ::2] = 1.0
    sds = np.array([0.3, 0.4, 0.5])
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0, shape=d)
        comps = [
            np.log(w[j]) + pm.logp(pm.Normal.dist(means[j], sds[j]), x).sum() for j in range(3)
        ]
        pm.Potential("mixture", pt.logsumexp(pt.stack(comps)))
    log_z = special.logsumexp(
        [
            np.log(w[j])
            + stats.multivariate_normal(np.zeros(d), (1 + sds[j] ** 2) * np.eye(d)).logpdf(means[j])
            for j in range(3)
        ]
    )
    return ExactModel("mixture10_overlapping", model, float(log_z))


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
        + sum(int(st.attrs.get(k, 0)) for k in ("n_logp_evals_tune", "n_logp_evals_pilot", "n_logp_evals_laplace")),
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
