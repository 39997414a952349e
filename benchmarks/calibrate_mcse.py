"""Calibration of the reported Monte Carlo error of log Z against exact evidences.

    python benchmarks/calibrate_mcse.py [--replicates 50] [--models normal_mean,...]
                                        [--samplers ais,crais,smc] [--draws 500]
                                        [--chains 4] [--n-steps 50] [--json out.json]

For every (model, sampler) pair the sampler is run ``--replicates`` times with different
seeds on a model whose log Z is known in closed form (``pymc_crais/validation/testing.py``). Two
levels are checked:

* **combined** (what ``pmc.log_marginal_likelihood`` returns for a run of ``--chains``
  chains): coverage of ``|log Ẑ − log Z| ≤ 2·MCSE``, mean bias ``E[log Ẑ] − log Z``
  (± its standard error), the mean reported MCSE and the SD of ``log Ẑ`` over replicates;
* **per chain** (the within-chain error from the chain's own final weights and Eve
  ancestry, ``sample_stats.log_marginal_likelihood_mcse``): the same over all
  ``replicates × chains`` chains.

A well-calibrated error bar has ``mean MCSE ≈ SD`` and coverage near 95 %. Results are
recorded in docs/reliability.md.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

MODELS = ("normal_mean", "linear_regression", "gaussian_mixture_potential")
SAMPLERS = ("ais", "crais", "smc")


def run_sampler(pmc, name: str, model, seed: int, draws: int, chains: int, n_steps: int):
    """One run of ``name`` at the calibration's small sizes (cores=1)."""
    common = {"model": model, "draws": draws, "chains": chains, "cores": 1, "random_seed": seed, "progressbar": False}
    if name == "ais":
        return pmc.sample_ais(schedule="exponential", n_steps=n_steps, schedule_kwargs={"tau_min": 1e-3}, **common)
    if name == "crais":
        return pmc.sample_crais(n_steps=n_steps, **common)
    if name == "smc":
        return pmc.sample_smc(**common)
    raise ValueError(f"unknown sampler {name!r}; choose from {SAMPLERS}")


def summarize(log_z: float, values, mcse, chain_values, chain_mcse) -> dict:
    """Coverage, bias, MCSE and spread of replicate runs against the exact ``log_z``."""
    v, m = np.asarray(values), np.asarray(mcse)
    cv, cm = np.asarray(chain_values).ravel(), np.asarray(chain_mcse).ravel()
    err, cerr = v - log_z, cv - log_z
    r = v.size
    return {
        "replicates": int(r),
        "coverage_2mcse": float(np.mean(np.abs(err) <= 2 * m)),
        "coverage_se": float(np.sqrt(max(np.mean(np.abs(err) <= 2 * m) * (1 - np.mean(np.abs(err) <= 2 * m)), 1e-12) / r)),
        "bias": float(err.mean()),
        "bias_se": float(err.std(ddof=1) / np.sqrt(r)),
        "mean_mcse": float(m.mean()),
        "rms_mcse": float(np.sqrt(np.mean(m**2))),
        "sd": float(v.std(ddof=1)),
        "chain_coverage_2mcse": float(np.mean(np.abs(cerr) <= 2 * cm)),
        "chain_bias": float(cerr.mean()),
        "chain_rms_mcse": float(np.sqrt(np.mean(cm**2))),
        "chain_sd": float(cv.std(ddof=1)),
    }


def main(argv=None) -> dict:
    """Run the calibration and print the table; returns the results as a dict."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicates", type=int, default=50)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--samplers", default=",".join(SAMPLERS))
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--n-steps", type=int, default=50, help="steps of AIS and of CR-AIS's final run")
    ap.add_argument("--seed", type=int, default=1000, help="replicate r uses seed + r")
    ap.add_argument("--json", default=None, help="also write the results to this file")
    args = ap.parse_args(argv)

    import pymc_crais as pmc
    from pymc_crais.validation import testing as em

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    samplers = [s.strip() for s in args.samplers.split(",") if s.strip()]
    for m in models:
        if m not in MODELS:
            ap.error(f"unknown model {m!r}; choose from {MODELS}")
    for s in samplers:
        if s not in SAMPLERS:
            ap.error(f"unknown sampler {s!r}; choose from {SAMPLERS}")

    print(
        f"# calibrate_mcse: replicates={args.replicates} draws={args.draws} chains={args.chains} "
        f"n_steps={args.n_steps} seed={args.seed}",
        flush=True,
    )
    results = {"settings": vars(args), "rows": []}
    for model_name in models:
        case = getattr(em, model_name)()
        for sampler in samplers:
            t0 = time.perf_counter()
            vals, mcses, cvals, cmcses = [], [], [], []
            for r in range(args.replicates):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    idata = run_sampler(pmc, sampler, case.model, args.seed + r, args.draws, args.chains, args.n_steps)
                value, mcse = pmc.log_marginal_likelihood(idata)
                st = idata.sample_stats
                vals.append(value)
                mcses.append(mcse)
                cvals.append(st["log_marginal_likelihood"].values)
                cmcses.append(st["log_marginal_likelihood_mcse"].values)
            row = {
                "model": model_name,
                "sampler": sampler,
                "log_z": case.log_z,
                "seconds_per_run": (time.perf_counter() - t0) / args.replicates,
                **summarize(case.log_z, vals, mcses, cvals, cmcses),
                "raw": {  # per replicate, to study other error bars offline
                    "log_z": [float(v) for v in vals],
                    "mcse": [float(m) for m in mcses],
                    "chain_log_z": np.asarray(cvals).tolist(),
                    "chain_mcse": np.asarray(cmcses).tolist(),
                },
            }
            results["rows"].append(row)
            print(
                f"{model_name:27s} {sampler:6s} R={row['replicates']:3d} "
                f"cover={100 * row['coverage_2mcse']:5.1f}% bias={row['bias']:+.4f}±{row['bias_se']:.4f} "
                f"mcse={row['mean_mcse']:.4f} sd={row['sd']:.4f} | per chain: "
                f"cover={100 * row['chain_coverage_2mcse']:5.1f}% bias={row['chain_bias']:+.4f} "
                f"rms_mcse={row['chain_rms_mcse']:.4f} sd={row['chain_sd']:.4f} "
                f"({row['seconds_per_run']:.2f} s/run)",
                flush=True,
            )
    print_table(results["rows"])
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return results


def print_table(rows) -> None:
    """A Markdown table of the rows (as pasted into docs/reliability.md)."""
    print()
    print(
        "| model | sampler | R | coverage ±2·MCSE | mean bias | mean MCSE | SD of log Ẑ "
        "| chain coverage | chain RMS MCSE | chain SD |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['model']} | {r['sampler']} | {r['replicates']} | {100 * r['coverage_2mcse']:.0f} % "
            f"| {r['bias']:+.3f} ± {r['bias_se']:.3f} | {r['mean_mcse']:.3f} | {r['sd']:.3f} "
            f"| {100 * r['chain_coverage_2mcse']:.0f} % | {r['chain_rms_mcse']:.3f} | {r['chain_sd']:.3f} |"
        )


if __name__ == "__main__":
    main()
