"""The annealed starts (``samplers/engine/annealed_start.py``): the pilot's size, its cap on
transitions a stage and the shrunk fit, against the rules before them.

    python benchmarks/pilot_fit.py --cases applied_hier60_centred [--sampler smc|crais] \
        [--seeds 31,32] [--chains 4] [--variants new,old] [--json PATH]

Each run is a fresh process calling ``pmc.sample_smc`` (or ``pmc.sample_crais``) with
``model=..., random_seed=seed, chains=chains, cores=1, progressbar=False`` (``cores=1`` as
``benchmarks/validate.py``). A variant sets module constants of ``annealed_start`` (see
``VARIANTS``): ``new`` the rules as they are; ``old`` as before this benchmark (``sample_smc``'s
pilot with ``sample_smc``'s own cap of 20 transitions a stage and the sample covariance;
CR-AIS's pilot with the run's ``draws`` particles a chain too); for CR-AIS ``half`` is the
rule as it is written out, ``small`` a quarter of ``draws`` and ``capped`` all of them (both
with the cap and the shrunk fit).
Variants alternate within each (case, seed). Prints one line per run: wall seconds, log Z
error against the case's reference ± MCSE, all model evaluations (set-up, pilot, chains,
refit), the pilot's, the fitted start's Pareto k̂ and the start chosen; then per variant the
median wall time and evaluations, and how many runs did not keep the annealed start.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
# the module constants each variant sets, per sampler (``new``: none, the rule as it is)
VARIANTS = {
    "smc": {
        "new": {},
        "old": {"SMC_PILOT_MAX_TRANSITIONS": None, "SMC_FIT_SHRINK": False},
        "cap": {"SMC_FIT_SHRINK": False},
        "shrink": {"SMC_PILOT_MAX_TRANSITIONS": None},
    },
    "crais": {
        "new": {},
        "old": {"CRAIS_PILOT_FRACTION": None, "CRAIS_PILOT_MAX_TRANSITIONS": None, "CRAIS_FIT_SHRINK": False},
        "small": {"CRAIS_PILOT_FRACTION": 0.25},
        "half": {"CRAIS_PILOT_FRACTION": 0.5, "CRAIS_PILOT_MAX_TRANSITIONS": 10, "CRAIS_FIT_SHRINK": True},
        "capped": {"CRAIS_PILOT_FRACTION": None, "CRAIS_PILOT_MAX_TRANSITIONS": 10, "CRAIS_FIT_SHRINK": True},
    },
}

CHILD = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
import numpy as np
import pymc_crais as pmc
from pymc_crais.samplers.engine import annealed_start as A
from pymc_crais.validation import get_case
case, seed, chains, sampler, settings = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], json.loads(sys.argv[5])
for name, value in settings.items():
    setattr(A, name, value)
inst = get_case(case).build()
sample = pmc.sample_smc if sampler == "smc" else pmc.sample_crais
t = time.perf_counter()
idata = sample(model=inst.model, random_seed=seed, chains=chains, cores=1, progressbar=False)
wall = time.perf_counter() - t
ss = idata.sample_stats
at = ss.attrs
lz, mcse = pmc.log_marginal_likelihood(idata)[:2]
run_level = sum(int(at.get(k, 0)) for k in ("n_logp_evals_laplace", "n_logp_evals_pilot", "n_logp_evals_tune", "n_logp_evals_refit"))
print(json.dumps(dict(wall=wall, error=float(lz) - inst.log_z, mcse=float(mcse),
    evals=int(np.asarray(ss["n_logp_evals"]).sum()) + run_level,
    pilot=int(at.get("n_logp_evals_annealed_start", 0)),
    khat=float(at.get("init_annealed_pareto_k", np.nan)), choice=str(at.get("init_choice")))))
"""


def run_one(case: str, seed: int, chains: int, sampler: str, variant: str) -> dict:
    settings = json.dumps(VARIANTS[sampler][variant])
    out = subprocess.run(
        [sys.executable, "-c", CHILD, case, str(seed), str(chains), sampler, settings],
        capture_output=True, text=True, cwd=REPO, check=False,
    )  # fmt: skip
    if out.returncode != 0:
        return {"case": case, "seed": seed, "sampler": sampler, "variant": variant, "failed": out.stderr[-500:]}
    lines = out.stdout.strip().splitlines()
    if not lines:
        return {"case": case, "seed": seed, "sampler": sampler, "variant": variant, "failed": "no output"}
    return {"case": case, "seed": seed, "sampler": sampler, "variant": variant, **json.loads(lines[-1])}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", required=True)
    ap.add_argument("--seeds", default="31,32")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--sampler", default="smc", choices=sorted(VARIANTS))
    ap.add_argument("--variants", default="new,old")
    ap.add_argument("--json", default=None, help="append each run's record (one JSON line) here")
    args = ap.parse_args(argv)
    variants = args.variants.split(",")
    unknown = sorted(set(variants) - set(VARIANTS[args.sampler]))
    if unknown:
        ap.error(f"--variants: unknown {unknown}; choose from {sorted(VARIANTS[args.sampler])}")
    rows = []
    for case in args.cases.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            for variant in variants:
                r = run_one(case, seed, args.chains, args.sampler, variant)
                rows.append(r)
                if args.json:
                    with open(args.json, "a") as fh:
                        fh.write(json.dumps(r) + "\n")
                if "failed" in r:
                    print(f"{case} seed {seed} {variant}: FAILED {r['failed']}", flush=True)
                    continue
                print(f"{case} seed {seed} {variant:6s} wall {r['wall']:6.1f} s  error {r['error']:+.3f} "
                      f"± {r['mcse']:.3f}  evals {r['evals'] / 1e6:5.2f} M  pilot {r['pilot'] / 1e6:4.2f} M  "
                      f"k̂ {r['khat']:.2f}  start {r['choice']}", flush=True)  # fmt: skip
    for case in args.cases.split(","):
        for variant in variants:
            ok = [r for r in rows if r["case"] == case and r["variant"] == variant and "failed" not in r]
            if ok:
                print(f"{case} {variant:6s} median wall {np.median([r['wall'] for r in ok]):.1f} s, "
                      f"median evals {np.median([r['evals'] for r in ok]) / 1e6:.2f} M, "
                      f"annealed start not kept {sum(r['choice'] != 'annealed' for r in ok)} of {len(ok)}")  # fmt: skip


if __name__ == "__main__":
    main()
