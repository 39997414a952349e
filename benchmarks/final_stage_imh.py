"""SMC's moves at the last stage (τ = 1): the default ``"hmc_final_imh"`` against HMC throughout.

    python benchmarks/final_stage_imh.py linreg_d10,pima_sd5,...  [--seeds 2,3,4,5,6,7]

SMC's estimate of ``log Z`` is complete before the last stage's moves (no reweighting
follows them), so the kernel used there changes only the posterior draws and the cost.
``pmc.sample_smc``'s ``kernel="auto"`` on continuous models (off funnels) is
``"hmc_final_imh"``: HMC below τ = 1, cross-fitted independence Metropolis at τ = 1 while a
transition accepts at least 29 % of its proposals (``pymc_crais.core.kernels.imh.FinalIMH``).

Without ``--seeds``, for each suite case in one process: both kernels once to compile, then
each timed (4 chains, seed 1, ``cores=1``; compiled functions found in memory). Printed:
whether ``log Z`` is the same to the bit, the wall time of the sampling call, model
evaluations, and the posterior draws' largest difference of means (in HMC's posterior
standard deviations) and the range of standard-deviation ratios.

With ``--seeds`` (an even number of them), the posterior check against the noise of the
draws themselves: the largest standardized difference of posterior means between runs of
HMC with two different seeds, of the default with two different seeds, and of HMC against
the default with different seeds. If the last-stage moves changed the posterior, the third
column would exceed the first two.
"""

from __future__ import annotations

import argparse
import time
import warnings

warnings.filterwarnings("ignore")
import numpy as np

import pymc_crais as pmc
from pymc_crais.validation import get_case


def summ(idata):
    """Per variable: the draws' means and standard deviations (chains pooled)."""
    post = idata["posterior"]
    out = {}
    for v in post.data_vars:
        a = np.asarray(post[v])
        a = a.reshape(a.shape[0] * a.shape[1], -1)
        out[v] = (a.mean(0), a.std(0))
    return out


def max_dmean(a, b) -> float:
    """Largest |difference of means| over all coordinates, in ``a``'s standard deviations."""
    return max(float(np.max(np.abs(a[v][0] - b[v][0]) / a[v][1])) for v in a)


def evals(idata) -> int:
    return int(np.asarray(idata["sample_stats"]["n_logp_evals"]).sum())


def timing(name: str) -> None:
    c = get_case(name).build()
    kw = dict(model=c.model, random_seed=1, chains=4, cores=1, progressbar=False)
    pmc.sample_smc(kernel="hmc", **kw)  # compile
    pmc.sample_smc(**kw)
    t = time.perf_counter()
    a = pmc.sample_smc(kernel="hmc", **kw)
    ta = time.perf_counter() - t
    t = time.perf_counter()
    b = pmc.sample_smc(**kw)
    tb = time.perf_counter() - t
    kernel = b["sample_stats"].attrs["kernel"]
    la, lb = pmc.log_marginal_likelihood(a)[0], pmc.log_marginal_likelihood(b)[0]
    A, B = summ(a), summ(b)
    sr = [float(x) for v in A for x in (B[v][1] / A[v][1])]
    print(
        f"{name:26s} default {kernel:14s} logZ same {la == lb} "
        f"t {ta:.2f}->{tb:.2f}s evals {evals(a) / 1e3:.0f}k->{evals(b) / 1e3:.0f}k "
        f"max|dmean|/sd {max_dmean(A, B):.3f} sd ratio {min(sr):.2f}-{max(sr):.2f}",
        flush=True,
    )


def null_check(name: str, seeds: list[int]) -> None:
    c = get_case(name).build()
    hmc, default = [], []
    for s in seeds:
        kw = dict(model=c.model, random_seed=s, chains=4, cores=1, progressbar=False)
        hmc.append(summ(pmc.sample_smc(kernel="hmc", **kw)))
        default.append(summ(pmc.sample_smc(**kw)))
    pairs = list(zip(range(0, len(seeds), 2), range(1, len(seeds), 2)))
    hh = [max_dmean(hmc[i], hmc[j]) for i, j in pairs]
    dd = [max_dmean(default[i], default[j]) for i, j in pairs]
    hd = [max_dmean(hmc[i], default[j]) for i, j in pairs] + [
        max_dmean(hmc[j], default[i]) for i, j in pairs
    ]
    print(
        f"{name:26s} HMC vs HMC {np.max(hh):.3f} (mean {np.mean(hh):.3f})  default vs default "
        f"{np.max(dd):.3f} (mean {np.mean(dd):.3f})  HMC vs default {np.max(hd):.3f} "
        f"(mean {np.mean(hd):.3f})",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", help="comma-separated suite case names")
    ap.add_argument("--seeds", default="", help="an even number of seeds: the posterior check")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s]
    if seeds and len(seeds) % 2:
        ap.error("--seeds needs an even number of seeds (they are compared in pairs)")
    for name in args.cases.split(","):
        if seeds:
            null_check(name, seeds)
        else:
            timing(name)


if __name__ == "__main__":
    main()
