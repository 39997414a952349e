"""Where a ``pm.sample_smc(kernel=pmc.X)`` call spends its time and model evaluations.

    python benchmarks/profile_dropins.py [--cases sonar_sd5,sonar_int_sd1]
        [--samplers pm_batched,pm_crsmc,pm_crais] [--chains 4] [--seed 22] [--json PATH]

Each (case, drop-in) runs in a fresh subprocess, as ``benchmarks/validate.py`` runs it
(``pm.sample_smc(kernel=..., chains, cores=1, random_seed, progressbar=False)``, PyMC's
defaults otherwise). The kernel class is subclassed only to time its construction (the
run-level plan: checks, compilation, the automatic start, the start's weights, pilot and
CR-AIS's tuning run, done once by PyMC before its chains) and its stages
(``update_beta_and_weights``, where each stage's reweighting, resampling and moves happen).
Printed per run: log Z error ± MCSE against the case's reference; wall time split into the
plan, the stages and the rest (PyMC's driver and output); run-level evaluations (Laplace
fit, start, pilot, tuning run) and each chain's; per chain the stages, the transitions,
and how many of them were made by stages that did not resample (CR-SMC's one-transition
stages). Wall times on a shared machine are noisy: the load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DROP_INS = {"pm_batched": "BatchedSMC", "pm_crsmc": "CRSMC", "pm_crais": "CRAIS"}
RUN_LEVEL = ("n_logp_evals_laplace", "n_logp_evals_pilot", "n_logp_evals_tune")
ATTRS = ("init_choice", "start_pareto_k", "predicted_mcse", "tune_relative_variance",
         "n_tune_steps", "n_tune_attempts", "n_steps", "delta")  # fmt: skip


def profile_one(case: str, sampler: str, chains: int, seed: int) -> dict:
    """One drop-in call on one case, in this process; returns the record."""
    warnings.simplefilter("ignore")
    import pymc as pm

    import pymc_crais as pmc
    from pymc_crais.validation import get_case

    inst = get_case(case).build()
    base = getattr(pmc, DROP_INS[sampler])
    timer = {"plan_s": 0.0, "stages_s": 0.0}

    class Timed(base):
        def __init__(self, *args, **kwargs):
            t = time.perf_counter()
            super().__init__(*args, **kwargs)
            timer["plan_s"] += time.perf_counter() - t

        def update_beta_and_weights(self):
            t = time.perf_counter()
            super().update_beta_and_weights()
            timer["stages_s"] += time.perf_counter() - t

    Timed.__name__ = base.__name__
    t0 = time.perf_counter()
    idata = pm.sample_smc(kernel=Timed, model=inst.model, random_seed=seed, chains=chains,
                          cores=1, progressbar=False)  # fmt: skip
    wall = time.perf_counter() - t0
    log_z, mcse = pmc.log_marginal_likelihood(idata)
    st = idata["sample_stats"]
    attrs = {k: (v.item() if hasattr(v, "item") else v) for k, v in st.attrs.items()}
    per_chain = []
    for c in range(st.sizes["chain"]):
        steps = np.asarray(st["n_mcmc_steps"].values[c], dtype=float)
        steps = steps[np.isfinite(steps)]
        evals = np.asarray(st["n_logp_evals"].values[c], dtype=float)
        per_chain.append({
            "stages": int(steps.size),
            "transitions": int(steps.sum()),
            "one_transition_stages": int(np.sum(steps[:-1] == 1)),
            "evals": int(evals[np.isfinite(evals)][-1]),
        })  # fmt: skip
    run_level = {k: int(attrs.get(k, 0) or 0) for k in RUN_LEVEL}
    return {
        "case": case, "sampler": sampler, "chains": chains, "seed": seed,
        "error": float(log_z - inst.log_z), "mcse": float(mcse), "wall_s": wall,
        "other_s": wall - timer["plan_s"] - timer["stages_s"], **timer,
        "run_level_evals": run_level,
        "evals": sum(p["evals"] for p in per_chain) + sum(run_level.values()),
        "per_chain": per_chain, "attrs": {k: attrs.get(k) for k in ATTRS if k in attrs},
        "loadavg": list(os.getloadavg()),
    }  # fmt: skip


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="sonar_sd5,sonar_int_sd1")
    ap.add_argument("--samplers", default=",".join(DROP_INS))
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--json", default=None, help="write the records here")
    ap.add_argument("--_worker", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._worker:
        case, sampler, out = args._worker
        Path(out).write_text(json.dumps(profile_one(case, sampler, args.chains, args.seed)))
        return
    samplers = [s.strip() for s in args.samplers.split(",") if s.strip()]
    for s in samplers:
        if s not in DROP_INS:
            ap.error(f"--samplers: unknown drop-in {s!r}; choose from {', '.join(DROP_INS)}")
    recs = []
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for case in [c.strip() for c in args.cases.split(",") if c.strip()]:
        for s in samplers:
            with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
                out = f.name
            cmd = [sys.executable, str(Path(__file__).resolve()), "--_worker", case, s, out,
                   "--chains", str(args.chains), "--seed", str(args.seed)]  # fmt: skip
            subprocess.run(cmd, env=env, check=True)
            r = json.loads(Path(out).read_text())
            Path(out).unlink(missing_ok=True)
            recs.append(r)
            ch = r["per_chain"]
            print(
                f"{case} {s}: error {r['error']:+.3f} ± {r['mcse']:.3f}; wall {r['wall_s']:.1f} s "
                f"(plan {r['plan_s']:.1f}, stages {r['stages_s']:.1f}, other {r['other_s']:.1f}; "
                f"load {r['loadavg'][0]:.1f}); evaluations {r['evals'] / 1e6:.2f} M "
                f"(run-level {sum(r['run_level_evals'].values()) / 1e6:.2f} M {r['run_level_evals']}); "
                f"per chain: stages {[p['stages'] for p in ch]}, transitions "
                f"{[p['transitions'] for p in ch]}, of which in one-transition stages "
                f"{[p['one_transition_stages'] for p in ch]}, evaluations "
                f"{[round(p['evals'] / 1e6, 2) for p in ch]} M; {r['attrs']}",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(recs, indent=1) + "\n")


if __name__ == "__main__":
    main()
