"""Which gradient-free kernel ``kernel="auto"`` should pick on models with discrete variables.

Runs every annealing sampler with ``kernel="imh"`` and ``kernel="rwmh"`` on two models with
exact evidence and discrete parameters: the suite's ``coal_switchpoint`` (a switchpoint and
two rates) and a binomial with unknown number of trials ``N`` (``N`` discrete uniform, ``p``
Beta, exact by summing over ``N``). Prints the error of ``log Z`` against the exact value in
units of the reported MCSE and the model evaluations spent (compare evaluations, not
seconds, on a shared machine).

    python benchmarks/bench_discrete_kernel.py --draws 1000 --chains 4
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from scipy import special



def binomial_unknown_n(seed: int = 7, n_max: int = 60):
    """k_i ~ Binomial(N, p), N ~ DiscreteUniform(max k, n_max), p ~ Beta(1, 1)."""
    import pymc as pm

    k = np.random.default_rng(seed).binomial(25, 0.4, size=6)
    lo = int(k.max())
    with pm.Model() as model:
        n = pm.DiscreteUniform("N", lower=lo, upper=n_max)
        p = pm.Beta("p", 1.0, 1.0)
        pm.Binomial("k", n=n, p=p, observed=k)
    terms = []
    for big_n in range(lo, n_max + 1):
        log_choose = (
            special.gammaln(big_n + 1) - special.gammaln(k + 1) - special.gammaln(big_n - k + 1)
        )
        terms.append(log_choose.sum() + special.betaln(1 + k.sum(), 1 + (big_n - k).sum()))
    log_z = special.logsumexp(terms) - np.log(n_max - lo + 1)
    return model, float(log_z)


def models():
    from pymc_crais.validation import get_case

    case = get_case("coal_switchpoint").build()
    yield "coal_switchpoint", case.model, case.log_z
    model, log_z = binomial_unknown_n()
    yield "binomial_unknown_n", model, log_z


def main(argv=None) -> None:
    import pymc_crais as pmc

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--samplers", default="smc,crais,ais,rts")
    ap.add_argument("--kernels", default="imh,rwmh")
    args = ap.parse_args(argv)
    print("| model | sampler | kernel | log Z − exact | MCSE | z | evaluations | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, model, exact in models():
        for sampler in args.samplers.split(","):
            for kernel in args.kernels.split(","):
                fn = getattr(pmc, f"sample_{sampler}")
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    idata = fn(
                        model=model,
                        draws=args.draws,
                        chains=args.chains,
                        cores=1,
                        random_seed=args.seed,
                        kernel=kernel,
                        progressbar=False,
                    )
                wall = time.perf_counter() - t0
                log_z, mcse = pmc.log_marginal_likelihood(idata)
                evals = int(np.asarray(idata["sample_stats"]["n_logp_evals"]).sum())
                err = log_z - exact
                print(
                    f"| {name} | {sampler} | {kernel} | {err:+.3f} | {mcse:.3f} | "
                    f"{err / mcse:+.2f} | {evals} | {wall:.0f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
