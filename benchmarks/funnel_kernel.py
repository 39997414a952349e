"""Funnels: HMC against independence Metropolis as SMC's moves, and pm.sample_smc, over seeds.

    python benchmarks/funnel_kernel.py [--cases hier_centered,eight_schools_centered,bimodal_square]
        [--seeds 11-20] [--methods hmc,imh,imh_then_hmc,default,pm] [--rerun] [--no-run]
    python benchmarks/funnel_kernel.py --groups 30,60 --seeds 1,2

The suite's cases whose Laplace fit finds no interior mode (a Hessian with non-concave
directions: the centred funnels and the bimodal square), where ``kernel="auto"`` in
``pmc.sample_smc`` took ``"imh_then_hmc"`` until the batched parameter checks were fixed
and takes ``"hmc_final_imh"`` since (pymc_crais/samplers/engine/kernel_choice.py). For every seed,
``benchmarks/validate.py`` runs ``pmc.sample_smc`` with ``kernel="hmc"``, ``"imh"``,
``"imh_then_hmc"`` and the default (otherwise defaults: 4 chains, 2000 particles,
``cores=1``) and ``pm.sample_smc`` with its defaults, each in its own process; records go to
``benchmarks/out/funnel_kernel_{hmc,imh,imh_then_hmc,default,pm}.json`` and the summary table
is printed (Markdown). Accuracy per (case, method) over the seeds: RMS error against the
exact ``log Z``, the largest error, how many runs missed 0.1 nat / 3 MCSE and how many warned
(``UnreliableEvidenceWarning``), the mean MCSE and model evaluations, and the cost of a
given accuracy, RMS² × evaluations, relative to HMC's.

``--groups J,...``: the suite's synthetic centred funnel (``hier_synthetic``, 3 observations
per group, data seed J) with J groups instead of 8, outside the suite, its exact ``log Z`` by
quadrature over τ; ``pmc.sample_smc`` with ``kernel="hmc"``, ``"imh"``, ``"imh_then_hmc"``
and the default ``"auto"`` in this process (4 chains, ``cores=1``): error, MCSE, evaluations
and whether it warned, per seed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "out"
METHODS = {  # label -> (validate.py sampler, --kwargs)
    "smc, kernel='hmc'": ("smc", {"kernel": "hmc"}),
    "smc, kernel='imh'": ("smc", {"kernel": "imh"}),
    "smc, kernel='imh_then_hmc'": ("smc", {"kernel": "imh_then_hmc"}),
    "smc, default ('hmc_final_imh')": ("smc", None),
    "pm.sample_smc": ("pm_smc", None),
}
FILES = {"smc, kernel='hmc'": "funnel_kernel_hmc.json", "smc, kernel='imh'": "funnel_kernel_imh.json",
         "smc, kernel='imh_then_hmc'": "funnel_kernel_imh_then_hmc.json",
         "smc, default ('hmc_final_imh')": "funnel_kernel_default.json",
         "pm.sample_smc": "funnel_kernel_pm.json"}  # fmt: skip


def seeds_arg(text: str) -> list[int]:
    if "-" in text:
        a, b = text.split("-")
        return list(range(int(a), int(b) + 1))
    return [int(s) for s in text.split(",")]


def run(cases: str, seeds: list[int], methods: list[str] | None = None, rerun: bool = False) -> None:
    for label, (sampler, kwargs) in METHODS.items():
        if methods and not any(m in label for m in methods):
            continue
        for seed in seeds:
            cmd = [sys.executable, str(REPO / "benchmarks" / "validate.py"), "--cases", cases,
                   "--samplers", sampler, "--chains", "4", "--seed", str(seed),
                   "--results", str(OUT / FILES[label])]  # fmt: skip
            if kwargs:
                cmd += ["--kwargs", json.dumps(kwargs)]
            if rerun:
                cmd.append("--rerun")
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def table(cases: list[str], seeds: list[int]) -> str:
    rows = ["| case | method | runs | RMS error | largest error | > 0.1 nat | > 3 MCSE | warned "
            "| mean MCSE | mean evals | RMS² × evals vs HMC |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for case in cases:
        base = None
        for label in METHODS:
            path = OUT / FILES[label]
            recs = json.loads(path.read_text()) if path.exists() else {}
            rs = [r for r in recs.values() if r["case"] == case and r["seed"] in seeds
                  and r.get("status") == "ok"]  # fmt: skip
            if not rs:
                continue
            e = np.array([r["error"] for r in rs])
            m = np.array([r["mcse"] for r in rs], dtype=float)
            ev = np.array([r["evals"] for r in rs], dtype=float)
            rms = float(np.sqrt(np.mean(e**2)))
            cost = rms**2 * ev.mean()
            base = cost if label.endswith("'hmc'") else base
            rel = f"{cost / base:.2f}" if base else "—"
            rows.append(
                f"| {case} | {label} | {len(rs)} | {rms:.3f} | {e[np.argmax(abs(e))]:+.3f} | "
                f"{int((abs(e) > 0.1).sum())} | {int((abs(e) > 3 * m).sum())} | "
                f"{sum(bool(r['unreliable_warned']) for r in rs)} | {np.nanmean(m):.3f} | "
                f"{ev.mean() / 1e6:.2f} M | {rel} |"
            )
    return "\n".join(rows)


def wide_funnels(groups: list[int], seeds: list[int]) -> str:
    import warnings

    import pymc_crais as pmc
    from pymc_crais.validation.exact_models import hier_synthetic

    rows = ["| groups J (d = J + 2) | kernel | seed | error | MCSE | evals | warned |",
            "|---|---|---|---|---|---|---|"]  # fmt: skip
    for j in groups:
        model, log_z, _, _ = hier_synthetic(True, J=j, seed=j)
        for kernel in ("hmc", "imh", "imh_then_hmc", "auto"):
            for seed in seeds:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    idata = pmc.sample_smc(model=model, random_seed=seed, chains=4, cores=1,
                                           progressbar=False, kernel=kernel)  # fmt: skip
                est, mcse = pmc.log_marginal_likelihood(idata)
                evals = int(np.asarray(idata["sample_stats"]["n_logp_evals"]).sum())
                warned = any(isinstance(w.message, pmc.UnreliableEvidenceWarning) for w in caught)
                rows.append(f"| {j} | {kernel} | {seed} | {est - log_z:+.3f} | {mcse:.3f} | "
                            f"{evals / 1e6:.2f} M | {'yes' if warned else 'no'} |")  # fmt: skip
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="hier_centered,eight_schools_centered,bimodal_square")
    ap.add_argument("--seeds", default="11-20")
    ap.add_argument("--no-run", action="store_true", help="only tabulate the stored records")
    ap.add_argument("--groups", default="", help="wide centred funnels with these group counts")
    ap.add_argument("--methods", default="", help="run only these: comma-separated 'hmc', 'imh', 'default', 'pm'")
    ap.add_argument("--rerun", action="store_true", help="replace the stored records of the runs")
    args = ap.parse_args()
    seeds = seeds_arg(args.seeds)
    if args.groups:
        print(wide_funnels([int(g) for g in args.groups.split(",")], seeds))
        return
    if not args.no_run:
        methods = [m for m in args.methods.split(",") if m]
        labels = {"pm": "pm.", "default": "default"}
        run(args.cases, seeds, [labels.get(m, f"'{m}'") for m in methods], args.rerun)
    print(table(args.cases.split(","), seeds))


if __name__ == "__main__":
    main()
