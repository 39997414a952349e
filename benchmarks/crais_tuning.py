"""How good is CR-AIS's tuning run, and does its quality predict the final run's error?

    python benchmarks/crais_tuning.py [--cases all | a,b] [--seed 12]

For each case, ``pmc.sample_crais()`` with its defaults (4 chains, ``cores=1``) and one line:
the final error ± MCSE against the case's reference; the tuning run's number of steps, the
fraction of its levels below τ = 1e-3 (a schedule that crawls), its final weights' ESS (as a
fraction of its particles) and Pareto k̂, its own ``log Z`` error; the final run's ESS per
chain; the schedule used (``constant_rate`` or the capped-tuning fallback ``linear``) and
the start. Each case runs in this process, one after another (compilation included).
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

import pymc_crais as pmc
from pymc_crais.core.weights import ess_from_log_weights
from pymc_crais.samplers import crais as crais_module
from pymc_crais.tail_stats import pareto_khat
from pymc_crais.validation.cases import CASES, get_case


def ess_fraction(log_w) -> float:
    """ESS of weights given by their logs, as a fraction of their number (zero weights
    included)."""
    lw = np.asarray(log_w, dtype=np.float64).ravel()
    return ess_from_log_weights(lw) / lw.size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="all")
    ap.add_argument("--seed", type=int, default=12)
    args = ap.parse_args()
    names = list(CASES) if args.cases == "all" else args.cases.split(",")

    captured = {}
    original = crais_module.constant_rate_tuning

    def capture(*a, **k):
        captured["tuning"] = original(*a, **k)
        return captured["tuning"]

    crais_module.constant_rate_tuning = capture  # the tuning run, as sample_crais made it
    warnings.simplefilter("ignore")
    for name in names:
        inst = get_case(name).build()
        idata = pmc.sample_crais(
            model=inst.model, chains=4, cores=1, random_seed=args.seed, progressbar=False
        )
        lz, mcse = pmc.log_marginal_likelihood(idata)
        tune = captured["tuning"].result
        tau = np.asarray(tune.stages["tau"])
        final_lw = np.asarray(idata.sample_stats["log_weights"].values)
        final_ess = [ess_fraction(row) for row in final_lw.reshape(final_lw.shape[0], -1)]
        attrs = idata.sample_stats.attrs
        print(
            f"{name} seed {args.seed}: error {lz - inst.log_z:+.3f} ± {mcse:.3f} | tuning: "
            f"{tau.size} steps, below 1e-3 {np.mean(tau < 1e-3):.2f}, ESS "
            f"{ess_fraction(tune.log_weights):.3f}, k̂ {pareto_khat(tune.log_weights):.2f}, "
            f"log Z error {tune.log_marginal_likelihood - inst.log_z:+.3f} | final ESS "
            f"{np.round(final_ess, 3).tolist()} | schedule {attrs['schedule']}, init "
            f"{attrs.get('init_choice')}",
            flush=True,
        )


if __name__ == "__main__":
    main()
