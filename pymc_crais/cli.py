"""The ``pymc-crais`` command line: ``pymc-crais demo`` runs the evidence demo."""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

__all__ = ["main"]


def _linear_regression_case(seed: int = 1, n: int = 50, d: int = 5, sigma: float = 0.5):
    """A conjugate model with an exact evidence: log N(y; 0, σ²I + X Xᵀ)."""
    import pymc as pm
    from scipy import stats

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X @ rng.normal(size=d) + rng.normal(0.0, sigma, size=n)
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 1.0, shape=d)
        pm.Normal("y", X @ beta, sigma, observed=y)
    exact = stats.multivariate_normal(np.zeros(n), sigma**2 * np.eye(n) + X @ X.T).logpdf(y)
    return model, float(exact)


def _run(label, model, reference, kind, args, sampler="sample_crais", **settings):
    import pymc_crais as pmc

    t0 = time.perf_counter()
    idata = getattr(pmc, sampler)(
        model=model,
        chains=args.chains,
        cores=args.cores,
        random_seed=args.seed,
        progressbar=False,
        **settings,
    )
    wall = time.perf_counter() - t0
    value, mcse = pmc.log_marginal_likelihood(idata)
    st = idata.sample_stats
    evals = int(st["n_logp_evals"].sum()) + sum(
        int(st.attrs.get(k, 0)) for k in ("n_logp_evals_tune", "n_logp_evals_pilot", "n_logp_evals_laplace")
    )
    print(
        f"{label:<34} {value:>11.3f} ± {mcse:<6.3f} {reference:>11.3f} ({kind:<9}) "
        f"{value - reference:>+8.3f} {wall:>7.1f} s {evals:>11,d}"
    )
    sys.stdout.flush()
    return value, mcse, wall


def demo(args) -> int:
    """Estimate log Z by CR-AIS for a conjugate model (exact answer known) and for Pima
    (from a Laplace fit and from the prior)."""
    import pymc_crais as pmc
    from pymc_crais.datasets import REFERENCE_LOG_Z, load_pima
    from pymc_crais.models import logistic_regression

    print(f"pymc_crais {pmc.__version__}: evidence by constant-rate AIS "
          f"({args.chains} chains, {args.draws} particles each, seed {args.seed})")
    print(f"{'model':<34} {'log Z ± MCSE':>20} {'reference':>23} {'error':>8} {'wall':>9} {'logp evals':>11}")
    model, exact = _linear_regression_case()
    _run("linear regression (d=5), prior", model, exact, "exact", args, draws=args.draws, n_steps=200)
    data = load_pima()
    pima = logistic_regression(data.X, data.y, prior_sd=5.0, feature_names=data.feature_names)
    ref = REFERENCE_LOG_Z["pima"][0]
    _run("Pima logistic (d=8), Laplace q0", pima, ref, "reference", args, draws=args.draws, n_steps=args.n_steps, init="laplace")
    _run("Pima logistic (d=8), prior q0", pima, ref, "reference", args, draws=args.draws, n_steps=4 * args.n_steps)
    print("wall time includes compiling the model; MCSE = larger of within- and between-chain errors")
    return 0


def main(argv=None) -> int:
    """Entry point of the ``pymc-crais`` console script."""
    parser = argparse.ArgumentParser(prog="pymc-crais", description=__doc__)
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser("demo", help="estimate log Z on bundled examples and print a table")
    p.add_argument("--draws", type=int, default=500, help="particles per chain (default 500)")
    p.add_argument("--n-steps", type=int, default=100, help="final-run steps for Pima from the Laplace fit; 4x that from the prior (default 100)")
    p.add_argument("--chains", type=int, default=2, help="independent chains (default 2)")
    p.add_argument("--cores", type=int, default=None, help="worker processes (default: all CPUs)")
    p.add_argument("--seed", type=int, default=2026, help="random seed (default 2026)")
    args = parser.parse_args(argv)
    if args.command in (None, "demo"):
        if args.command is None:
            args = parser.parse_args(["demo", *(argv or [])])
        return demo(args)
    parser.print_help()
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
