"""How well the conditional-Laplace start's proposal over the hyperparameters fits a case.

    python benchmarks/conditional_start_theta.py [--case applied_ar1] [--seeds 11,12] [--big 8000]

For each split of the case (``candidate_blocks``) the Laplace-marginal fit is made and, from
its defensive Student-t mixture, refits to the weighted θ draws of 1,000-draw pilots are
iterated (0: the fit; 1: what ``sample_smc`` uses when it wins; 2: one more). For each, a
``--big``-draw run measures the family-level relative variance and Pareto k̂ that the
1,000-draw pilot estimates, and, at iteration 0, where the largest weights lie (θ, and θ
whitened by the fit's covariance) and the weighted mean and sd of θ against the fit's mode
and sd. A long tail of the θ posterior that the Student-t misses shows there.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default="applied_ar1")
    ap.add_argument("--seeds", default="11,12")
    ap.add_argument("--big", type=int, default=8000)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    from pymc_crais.core.conditional_laplace import ConditionalLaplace, fit_hyper
    from pymc_crais.core.schedules.run_length import relative_variance
    from pymc_crais.samplers.engine.compile import (
        compile_model_density,
        initial_point_vector,
        parameter_layout,
    )  # fmt: skip
    from pymc_crais.samplers.engine.conditional_start import (
        _refit,
        _theta_proposal,
        _weights,
        candidate_blocks,
        khat,
    )  # fmt: skip
    from pymc_crais.validation import get_case

    model = get_case(args.case).build().model
    md = compile_model_density(model)
    layout = parameter_layout(model)
    x0 = initial_point_vector(model, layout)
    for b in candidate_blocks(model, layout):
        fit = fit_hyper(md, b, x0[b.hyper], x0[b.latent])
        sd = np.sqrt(np.diag(fit.cov))
        print(f"{args.case}: {b.hyper.size} hyperparameters, mode {np.round(fit.mode, 2)}, "
              f"sd {np.round(sd, 2)}, problem: {fit.problem}")  # fmt: skip
        if fit.problem:
            continue
        for seed in (int(s) for s in args.seeds.split(",")):
            rng = np.random.default_rng(seed)
            p = ConditionalLaplace(b, _theta_proposal(fit), fit.x_at_mode, 4)
            for it in range(3):
                start, lw = _weights(p, rng, md, 1000)
                nxt = _refit(fit, p, start, lw)
                big, lwb = _weights(p, rng, md, args.big)
                print(f"  seed {seed} refit {it}: pilot relvar {relative_variance(lw):.2f}, "
                      f"{args.big}-draw relvar {relative_variance(lwb):.2f}, k̂ {khat(lwb):.2f}")  # fmt: skip
                if it == 0:
                    theta = big.x[np.unique(big.family, return_index=True)[1]][:, b.hyper]
                    w = np.exp(lwb - lwb.max())
                    w /= w.sum()
                    top = np.argsort(-w)[:3]
                    z = np.linalg.solve(np.linalg.cholesky(fit.cov), (theta - fit.mode).T).T
                    mean = w @ theta
                    print(f"    largest weights {np.round(w[top], 3)} at θ {np.round(theta[top], 2).tolist()}"
                          f" (whitened {np.round(z[top], 1).tolist()}); weighted mean {np.round(mean, 2)},"
                          f" sd {np.round(np.sqrt(w @ (theta - mean) ** 2), 2)}")  # fmt: skip
                if nxt is None:
                    break
                p = nxt


if __name__ == "__main__":
    main()
