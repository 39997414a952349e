"""Why ``reparameterize="noncentred"`` is not yet right on the BUGS one-way model.

    python benchmarks/noncentre_bugs.py [--seeds 1,2] [--draws 2000] [--thresholds 0.5,0.9]
        [--schedule constant_rate]
        [--json benchmarks/out/noncentre_bugs.json]

For each seed: ``pmc.sample_smc(reparameterize="noncentred")`` (4 chains, defaults) and the
same with ``threshold=0.9`` (more stages; ``--thresholds``, 0.5 is the default's), each chain's ``log Z``; then an independent check
of the rewritten model's evidence by plain importance sampling from a Student-t (df 5 and 3)
fitted to the first run's posterior draws in the unconstrained space (4 × 50,000 draws each):
if that agrees with the quadrature reference, the rewrite is right and the error is the
annealing path's. Also the prior probability that both precisions exceed ``e^-10`` (the
region the tempered targets move to at the first stages).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
from scipy.special import gammaincc, logsumexp

REF = -138.4624  # pymc_crais.validation: applied_bugs_oneway, quadrature


def _smc(model, seed, draws, **kw):
    import pymc_crais as pmc

    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        idata = pmc.sample_smc(
            draws, model=model, random_seed=seed, chains=4, cores=1, progressbar=False,
            reparameterize="noncentred", **kw,
        )  # fmt: skip
    lz, mcse = pmc.log_marginal_likelihood(idata)
    st = idata["sample_stats"]
    return idata, {
        "options": kw,
        "draws": draws,
        "seed": seed,
        "log_z": float(lz),
        "mcse": float(mcse),
        "error": float(lz - REF),
        "per_chain": [float(v) for v in st["log_marginal_likelihood"].values],
        "per_chain_mcse": [float(v) for v in st["log_marginal_likelihood_mcse"].values],
        "n_stages": [int(v) for v in st["n_stages"].values],
        "init_choice": st.attrs.get("init_choice"),
        "warnings": sorted({w.category.__name__ for w in caught} - {"DeprecationWarning"}),
        "wall_s": round(time.perf_counter() - t0, 1),
    }


def _importance_check(model, idata, rng):
    from pymc_crais.core.initial import StudentTInitial
    from pymc_crais.samplers.engine.compile import (
        compile_model_density,
        parameter_layout,
        resolve_compile_kwargs,
    )
    from pymc_crais.samplers.engine.noncentre import noncentred_model

    nc, _ = noncentred_model(model)
    layout = parameter_layout(nc)
    post = idata["posterior"]
    cols = {
        "tau_y_log__": np.log(post["tau_y"].values).reshape(-1, 1),
        "tau_a_log__": np.log(post["tau_a"].values).reshape(-1, 1),
        "a_noncentred": post["a_noncentred"].values.reshape(-1, 10),
        "mu": post["mu"].values.reshape(-1, 1),
    }
    x = np.concatenate([cols[s.name] for s in layout.slots], axis=1)
    density = compile_model_density(
        nc, gradient=False, compile_kwargs=resolve_compile_kwargs(None, None)
    )
    out = []
    for scale, df in ((1.0, 5.0), (1.3, 3.0)):
        q = StudentTInitial(x.mean(0), np.cov(x.T) * scale**2, df=df)
        ests = []
        for _ in range(4):
            xs = q.draw(rng, 50_000)
            ev = density.evaluate(xs)
            lw = ev.log_q0 + ev.delta - q.logpdf(xs)
            lw = np.where(np.isfinite(lw), lw, -np.inf)
            ests.append(float(logsumexp(lw) - np.log(lw.size)))
        out.append({"scale": scale, "df": df, "log_z": ests})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--thresholds", default="0.5,0.9")
    ap.add_argument("--schedule", default=None, help="schedule= of sample_smc (default: ESS)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    from pymc_crais.validation.applied_hier import bugs_oneway

    model = bugs_oneway()
    p = float(gammaincc(0.001, 0.001 * np.exp(-10.0)))
    rec = {"reference": REF, "prior_p_both_precisions_above_e-10": p * p, "runs": []}
    for seed in [int(s) for s in args.seeds.split(",")]:
        for th in [float(t) for t in args.thresholds.split(",")]:
            kw = {} if th == 0.5 else {"threshold": th}
            if args.schedule is not None:
                kw["schedule"] = args.schedule
            idata, r = _smc(model, seed, args.draws, **kw)
            print(json.dumps(r))
            rec["runs"].append(r)
            if seed == 1 and not kw and args.draws == 2000:
                rec["importance_check"] = _importance_check(model, idata, np.random.default_rng(0))
                print(json.dumps(rec["importance_check"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rec, f, indent=1)


if __name__ == "__main__":
    main()
