"""Are the chains of one run correlated? The intra-run F-test of per-chain log Ẑ errors.

    python benchmarks/chain_correlation.py --case normal_mean --seeds 300 --sampler smc \
        [--init auto] [--draws 2000] [--chains 4] [--split] [--kw '{"resample": "ess"}'] \
        [--jsonl runs.jsonl] [--summary]

Runs a sampler with its defaults (``cores=1``, the seed, ``progressbar=False``, plus the
given ``init``, ``draws`` and extra keyword arguments) on a case of
``benchmarks/mcse_coverage.py`` over replicate seeds and writes one JSON line per run with
the chains' ``log Ẑ_c``, their within-chain variances, the combined estimate and its MCSE.
With ``--split`` each "run" is ``chains`` separate one-chain runs (seeds ``seed·1000 + c``),
so that nothing run-level (``q0`` of ``init="auto"``, a pilot) is shared; their chains are
combined with :func:`pymc_crais.core.estimators.combine_chain_estimates` as a run's are.

``--summary`` prints, per label: the one-way ANOVA of the chain errors by run,
``F = C·Var(run mean) / mean within-run variance``, its p-value under independent chains
(``F ~ F(R−1, R(C−1))``), the intra-run correlation ``ρ = (F − 1)/(F + C − 1)``, the
calibration of the chain MCSE (SD of chain errors / RMS chain MCSE) and the ±2 MCSE coverage
of the combined estimate.

Finding (issue 13 item 4, ``sample_smc`` defaults, 4 chains, 2000 particles): on the 1-d
models ``init="auto"`` gives a Student-t ``q0`` that is bit-identical for every seed (the
Laplace fit starts at the model's initial point) and the ESS rule reaches τ = 1 in one
stage, so each chain is plain importance sampling from one fixed ``q0`` with its own
SeedSequence child: independent by construction. Measured: normal_mean, 600 seeds, F = 1.03
(95 % CI 0.91–1.18); one-chain runs (``--split``) 0.92; ``init="prior"`` (3 stages) 1.09;
beta_binomial (other seeds) 0.99. The F ≈ 1.6 of the 30-seed coverage run was one noisy
observation counted twice: normal_mean and beta_binomial on the same seeds have chain errors
correlated at 0.989 (the same standardized draws through near-identical weight functions).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np


def one_run(pmc, sampler, model, seed, chains, draws, init, extra):
    kw = {"model": model, "cores": 1, "progressbar": False, "draws": draws, **extra}
    if init is not None:
        kw["init"] = init
    fn = getattr(pmc, f"sample_{sampler}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = fn(chains=chains, random_seed=seed, **kw)
    st = idata.sample_stats
    value, mcse = pmc.log_marginal_likelihood(idata)
    return (
        value,
        mcse,
        (
            st["log_marginal_likelihood"].values.ravel().tolist(),
            (st["log_marginal_likelihood_mcse"].values.ravel() ** 2).tolist(),
            st["n_stages"].values.ravel().tolist(),
            st["n_logp_evals"].values.ravel().tolist(),
        ),
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default="normal_mean")
    ap.add_argument("--sampler", default="smc")
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--seed0", type=int, default=0)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--init", default=None)
    ap.add_argument("--split", action="store_true")
    ap.add_argument("--kw", default="{}", help="extra keyword arguments (JSON)")
    ap.add_argument("--label", default=None)
    ap.add_argument("--jsonl", default="chain_correlation.jsonl")
    ap.add_argument("--summary", action="store_true")
    args = ap.parse_args(argv)
    if args.summary:
        summarize(args.jsonl)
        return
    import pymc_crais as pmc
    from pymc_crais.core.estimators import combine_chain_estimates
    from pymc_crais.validation.testing import build_case

    model, exact = build_case(args.case)
    extra = json.loads(args.kw)
    label = args.label or (
        f"{args.case}/{args.sampler}/init={args.init or 'default'}/N={args.draws}"
        f"{'/split' if args.split else ''}{'/' + args.kw if extra else ''}"
    )
    for seed in range(args.seed0, args.seed0 + args.seeds):
        t0 = time.perf_counter()
        if args.split:
            parts = [
                one_run(pmc, args.sampler, model, seed * 1000 + c, 1, args.draws, args.init, extra)
                for c in range(args.chains)
            ]
            lz, v, ns, ne = ([x for p in parts for x in p[2][i]] for i in range(4))
            value, mcse, _ = combine_chain_estimates(lz, v)
        else:
            value, mcse, (lz, v, ns, ne) = one_run(
                pmc, args.sampler, model, seed, args.chains, args.draws, args.init, extra
            )
        rec = {"label": label, "case": args.case, "seed": seed, "exact": exact,
               "log_z": value, "mcse": mcse, "chain_log_z": lz, "chain_var": v,
               "n_stages": ns, "n_logp_evals": ne,
               "seconds": time.perf_counter() - t0}  # fmt: skip
        with open(args.jsonl, "a") as fh:
            fh.write(json.dumps(rec) + "\n")


def anova(err: np.ndarray) -> dict:
    """One-way ANOVA of ``err`` (runs × chains): F, its p-value and the intra-run correlation."""
    from scipy import stats

    r, c = err.shape
    msw = err.var(axis=1, ddof=1).mean()
    msb = c * err.mean(axis=1).var(ddof=1)
    f = msb / msw
    return {
        "F": f,
        "p": float(stats.f.sf(f, r - 1, r * (c - 1))),
        "F_ci": (
            f / stats.f.ppf(0.975, r - 1, r * (c - 1)),
            f / stats.f.ppf(0.025, r - 1, r * (c - 1)),
        ),
        "rho": (f - 1) / (f + c - 1),
    }


def summarize(path: str) -> None:
    with open(path) as fh:
        rows = [json.loads(line) for line in fh]
    labels = list(dict.fromkeys(r["label"] for r in rows))
    print("| label | runs | F (95% CI) | p | ρ | chain SD / RMS MCSE | coverage ±2 MCSE | "
          "mean err (SE) | mean stages | evals/run |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for lab in labels:
        rs = [r for r in rows if r["label"] == lab]
        err = np.array([np.array(r["chain_log_z"]) - r["exact"] for r in rs])
        var = np.array([r["chain_var"] for r in rs])
        e = np.array([r["log_z"] - r["exact"] for r in rs])
        m = np.array([r["mcse"] for r in rs])
        a = anova(err)
        calib = err.std(ddof=1) / np.sqrt(var.mean())
        print(
            f"| {lab} | {len(rs)} | {a['F']:.2f} ({a['F_ci'][0]:.2f}–{a['F_ci'][1]:.2f}) | "
            f"{a['p']:.2g} | {a['rho']:+.3f} | {calib:.3f} | "
            f"{np.mean(np.abs(e) <= 2 * m):.1%} | {e.mean():+.5f} ({e.std(ddof=1) / np.sqrt(e.size):.5f}) | "
            f"{np.mean([np.mean(r['n_stages']) for r in rs]):.2f} | "
            f"{np.mean([np.sum(r['n_logp_evals']) for r in rs]):.0f} |"
        )


if __name__ == "__main__":
    main()
