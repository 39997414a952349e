"""Experiment: SMC's moves at the last stage (τ = 1) by independence Metropolis instead of HMC.

    python benchmarks/final_stage_imh.py linreg_d10,pima_sd5,...

SMC's estimate of ``log Z`` is complete before the last stage's moves (no reweighting
follows them), so the kernel used there changes only the posterior draws and the cost.
For each suite case, in one process: ``pmc.sample_smc`` with its defaults once to compile,
then timed again (defaults), then with a kernel that is the default HMC below τ = 1 and the
cross-fitted independence Metropolis at τ = 1 (compiled functions found in memory for both,
except IMH's values-only function, compiled on its first use inside the timed call).
Printed per case: whether ``log Z`` is the same to the bit, the wall time of the sampling
call, model evaluations, and the posterior draws' largest difference of means (in the
default's posterior standard deviations) and the range of standard-deviation ratios.
Not a default: see docs/benchmarks.md, "SMC's last-stage moves".
"""

from __future__ import annotations

import sys
import time
import warnings

warnings.filterwarnings("ignore")
import numpy as np
import pymc_crais as pmc
from pymc_crais.core.kernels import HMC, IndependentMetropolis, IMHParams
from pymc_crais.core.kernel_base import MutationKernel
from pymc_crais.validation import get_case


class FinalIMH(MutationKernel):
    name = "hmc_final_imh"
    needs_gradient = True

    def __init__(self):
        self.hmc = HMC()
        self.imh = IndependentMetropolis()

    def init(self, state):
        return self.hmc.init(state)

    def tune(self, params, state, info, log_weights=None):
        # at τ = 1 the info is IMH's; HMC's step size is not used after it
        return self.hmc.tune(params, state, info, log_weights)

    def step(self, rng, state, density, path, tau, params):
        if np.ndim(tau) == 0 and tau == 1.0:
            p = IMHParams(np.zeros(state.dim), np.eye(state.dim), cross_fit=True)
            return self.imh.step(rng, state, density, path, tau, p)
        return self.hmc.step(rng, state, density, path, tau, params)

    def population_params(self, params):
        return self.hmc.population_params(params)

    def describe(self):
        return {"kernel": self.name}


def summ(idata):
    post = idata["posterior"]
    out = {}
    for v in post.data_vars:
        a = np.asarray(post[v])
        a = a.reshape(-1, *a.shape[2:]).reshape(a.shape[0] * a.shape[1], -1)
        out[v] = (a.mean(0), a.std(0))
    return out


def main(names: list[str]) -> None:
    for name in names:
        c = get_case(name).build()
        kw = dict(model=c.model, random_seed=1, chains=4, cores=1, progressbar=False)
        pmc.sample_smc(**kw)  # compile
        t = time.perf_counter()
        a = pmc.sample_smc(**kw)
        ta = time.perf_counter() - t
        t = time.perf_counter()
        b = pmc.sample_smc(kernel=FinalIMH(), **kw)
        tb = time.perf_counter() - t
        la, sa = pmc.log_marginal_likelihood(a)
        lb, sb = pmc.log_marginal_likelihood(b)
        ea = int(np.asarray(a["sample_stats"]["n_logp_evals"]).sum())
        eb = int(np.asarray(b["sample_stats"]["n_logp_evals"]).sum())
        A, B = summ(a), summ(b)
        dm = max(float(np.max(np.abs(A[v][0] - B[v][0]) / A[v][1])) for v in A)
        sr = [float(x) for v in A for x in (B[v][1] / A[v][1])]
        print(
            f"{name:22s} logZ same {la == lb} ({la - c.log_z:+.3f}/{lb - c.log_z:+.3f}) t {ta:.2f}->{tb:.2f}s evals {ea / 1e3:.0f}k->{eb / 1e3:.0f}k  max|dmean|/sd {dm:.3f} sd ratio {min(sr):.2f}-{max(sr):.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1].split(","))
