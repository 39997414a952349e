"""A lead, not adopted: ``sample_smc``'s annealed start also after a Laplace start whose
weights have Pareto k̂ above ``lap=K`` (default rule: only after a failed Laplace fit).

    python benchmarks/laplace_annealed_start.py CASE SEED base|lap=1 smc|batched

One run (4 chains, ``cores=1``) of ``pmc.sample_smc`` (``smc``) or of
``pm.sample_smc(kernel=pmc.BatchedSMC)`` (``batched``) in this process; prints one JSON line
(wall seconds, log Z error and MCSE, the pilot's evaluations, the fitted mixture's k̂, the
first start's k̂, the start chosen). With ``lap=K`` the module's ``smc_annealed_start`` is
replaced for this process: where ``init="auto"`` chose a Laplace start (Student-t or widened)
whose k̂ is above ``K``, the pilot chains (``draws/4`` particles, at most 10 transitions a
stage) run from that start, the Student-t fitted to them is mixed half and half with the
prior (drawn by ``prior_sampler``), and the mixture replaces the start if its k̂ is below 1;
the pilot's stage gate is not applied. With ``lapb=K`` both fits (shrunk and sample
covariance) are measured and the one with the lower k̂ replaces the start if that k̂ is below
the Laplace start's. Record: ``benchmarks/out/laplace_annealed_start-s9.jsonl``
(2026-11-27, ninth session; summary in ``benchmarks/reports/benchmarks.md``).
"""

from __future__ import annotations

import copy
import json
import sys
import time
import warnings


def main(case: str, seed: int, variant: str, sampler: str) -> dict:
    warnings.simplefilter("ignore")
    import pymc as pm

    import pymc_crais as pmc
    from pymc_crais.samplers import smc as smc_module
    from pymc_crais.samplers.engine import annealed_start as a
    from pymc_crais.samplers.engine.prior import prior_sampler
    from pymc_crais.validation import get_case

    bound = float(variant.split("=")[1]) if variant.startswith(("lap=", "lapb=")) else None
    rule = a.smc_annealed_start

    def after_laplace(setup) -> bool:
        at = setup.attrs
        return bool(
            bound is not None
            and at.get("init") == "auto"
            and at.get("init_choice") in ("laplace", "laplace_wide")
            and float(at.get("init_pareto_k", 0.0)) > bound
            and not setup.layout.has_discrete
            and setup.model_density.has_gradient
        )

    def annealed(setup):
        if a.smc_needs_annealed_start(setup) or not after_laplace(setup):
            return rule(setup)
        draws, attrs = a.smc_pilot(setup, a.smc_pilot_particles(setup.draws), a.SMC_PILOT_MAX_TRANSITIONS)
        with_prior = copy.copy(setup)
        with_prior.draw = prior_sampler(setup.model, setup.layout, setup.compile_kwargs).draw
        if variant.startswith("lapb="):  # both fits; the lower k̂, if below the first start's
            gate, shrink = a.SMC_START_KHAT, a.SMC_FIT_SHRINK
            a.SMC_START_KHAT = float(setup.attrs["init_pareto_k"])
            found = []
            for a.SMC_FIT_SHRINK in (True, False):
                tried = {}
                fit, spent = a._smc_fit(with_prior, draws, tried)
                attrs["n_logp_evals_annealed_start"] += spent
                if fit is not None:
                    k = min(v for key, v in tried.items() if key.startswith("init_annealed_pareto_k"))
                    found.append((k, a.SMC_FIT_SHRINK, fit))
            a.SMC_START_KHAT, a.SMC_FIT_SHRINK = gate, shrink
            start = None
            if found:
                k, shrunk, start = min(found, key=lambda f: f[0])
                attrs.update(init_annealed_pareto_k=k, init_annealed_shrunk=shrunk)
        else:
            start, spent = a._smc_fit(with_prior, draws, attrs)
            attrs["n_logp_evals_annealed_start"] += spent
        if start is None:
            return setup, attrs
        attrs.update(init_annealed=True, init_choice="annealed", init_first_choice=setup.attrs["init_choice"])
        new = copy.copy(setup)
        new.density, new.draw = start
        return new, attrs

    smc_module.smc_annealed_start = annealed
    inst = get_case(case).build()
    t = time.perf_counter()
    if sampler == "smc":
        idata = pmc.sample_smc(model=inst.model, chains=4, cores=1, random_seed=seed, progressbar=False)
    else:
        with inst.model:
            idata = pm.sample_smc(kernel=pmc.BatchedSMC, chains=4, cores=1, random_seed=seed, progressbar=False)
    wall = time.perf_counter() - t
    at = idata.sample_stats.attrs
    log_z, mcse = pmc.log_marginal_likelihood(idata)[:2]
    return {
        "case": case, "seed": seed, "variant": variant, "sampler": sampler, "wall": round(wall, 2),
        "err": round(float(log_z) - inst.log_z, 4), "mcse": round(float(mcse), 4),
        "pilot": at.get("n_logp_evals_annealed_start"), "k": at.get("init_annealed_pareto_k"),
        "k0": at.get("init_pareto_k"), "choice": at.get("init_choice"),
        "restart": at.get("refit_restarted"), "ref_evals": at.get("n_logp_evals_refit"),
    }  # fmt: skip


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4])))
