"""Bias of adaptive AIS log Z from population-tuned kernels, on a conjugate regression.

    python benchmarks/bench_adaptation_bias.py [--seeds 12] [--n 300] [--kernels hmc rwmh mala]

Target: the d = 5 Bayesian linear regression of ``pymc_crais.validation.testing.linear_regression``
(n = 50, σ = 0.5, prior N(0, I)) written in NumPy, exact log Z known. AIS from the prior,
exponential schedule of 200 steps, 10 transitions per stage, kernels re-tuned before every
transition (what :func:`pymc_crais.core.anneal.anneal` does). For each kernel three ways:

* ``self``: the parameters estimated from the whole population, the moving particle
  included (the kernels before the fix: ``tune`` output stripped of its per-particle parts);
* ``loo``: the kernels as they are (leave-one-out / cross-fitted moments);
* ``replay`` (HMC only): every transition's parameters recorded in one adaptive run (seed
  999) and replayed, fixed in advance, in the others: exactly unbiased AIS with kernels of
  the same quality.

Prints the mean error of log Z over the seeds ± its standard error and the mean within-run
standard error. No assertion: the numbers go to docs/algorithms.md ("Adaptation bias").
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pymc_crais.core import kernels as K
from pymc_crais.core.anneal import anneal
from pymc_crais.core.paths import make_path
from pymc_crais.core.schedules import make_fixed_schedule
from pymc_crais.validation.testing import linear_regression_density


def with_self_included(cls):
    """The kernel as before the fix: per-particle parts dropped, population moments used."""

    class SelfIncluded(cls):
        def tune(self, params, state, info, log_weights=None):
            return self.population_params(super().tune(params, state, info, log_weights))

    return SelfIncluded


class Recorder(K.HMC):
    def __init__(self):
        super().__init__()
        self.log = []

    def tune(self, params, state, info, log_weights=None):
        p = super().tune(params, state, info, log_weights)
        self.log.append(self.population_params(p))
        return p


class Replay(K.HMC):
    def __init__(self, log):
        super().__init__()
        self.log, self.i = log, 0

    def tune(self, params, state, info, log_weights=None):
        self.i += 1
        return self.log[self.i - 1]


def run(make_kernel, seeds, n):
    dens, log_z = linear_regression_density()
    errs, ses = [], []
    for s in seeds:
        rng = np.random.default_rng(s)
        res = anneal(rng, dens, dens.sample_q0(rng, n), make_path(0.0), make_fixed_schedule("exponential", 200),
                     make_kernel(), n_mcmc_steps=10)
        errs.append(res.log_marginal_likelihood - log_z)
        ses.append(np.sqrt(res.log_z_variance))
    errs = np.asarray(errs)
    se = errs.std(ddof=1) / np.sqrt(errs.size) if errs.size > 1 else float("nan")
    return errs.mean(), se, float(np.mean(ses))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=12)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--kernels", nargs="+", default=["hmc", "rwmh", "mala"])
    args = ap.parse_args()
    seeds = range(args.seeds)
    for name in args.kernels:
        cls = K.KERNELS[name]
        ways = {"self": with_self_included(cls), "loo": cls}
        if name == "hmc":
            rec = Recorder()
            run(lambda rec=rec: rec, [999], args.n)
            ways["replay"] = lambda log=rec.log: Replay(log)
        for way, make in ways.items():
            t = time.perf_counter()
            m, se, within = run(make, seeds, args.n)
            print(f"{name:5s} {way:7s} N={args.n}: log Z error {m:+.3f} ± {se:.3f} "
                  f"(mean within-run se {within:.3f}, {args.seeds} seeds, {time.perf_counter() - t:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
