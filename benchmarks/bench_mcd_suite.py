"""When does learned annealing pay on PyMC models? ``pmc.sample_mcd`` against ``pmc.sample_smc``
and ``pmc.sample_crais`` on cases of the validation suite, error against model evaluations.

    python benchmarks/bench_mcd_suite.py [--cases linreg_d2,nig_d6,...] [--seeds 3]
        [--methods mcd,ula,uha,mcd_t100] [--no-equal] [--results PATH] [--from PATH]

For each case and seed (``random_seed`` = 1, 2, …), every run with 2 chains, ``cores=1``, no
progress bar:

* ``mcd``, ``ula``, ``uha``: ``pmc.sample_mcd(method=...)`` with its defaults (K = 64,
  400 Adam iterations of 64 trajectories per chain, 2 000 final trajectories per chain);
  ``mcd_t100``: MCD with ``train_steps=100`` (a quarter of the training);
* ``smc``, ``crais``: ``pmc.sample_smc()`` and ``pmc.sample_crais()`` with their defaults;
* ``smc_eq``, ``crais_eq``: the same with ``draws`` scaled by (evaluations of the default
  MCD run of this case and seed) / (evaluations of their own default run), so that they
  spend about as many model evaluations as MCD; the evaluations they actually made are
  recorded.

Cost is model evaluations (a log-density-and-gradient call on one particle): every sampler's
``n_logp_evals`` summed over chains plus the pilot / tuning / Laplace evaluations kept in
``sample_stats.attrs``. For ``sample_mcd`` it includes the training (a Hessian-vector
product counts as two) and the Laplace fit (already in chain 0's count). Wall times are
recorded but taken on a shared, contended machine: compare evaluations, not seconds.

Records accumulate in ``--results`` (default ``benchmarks/out/mcd_suite.json``); a (case,
method, seed) already there is skipped, so the benchmark can be run in pieces. The table:
per case and method, the mean evaluations (and those spent training), the root-mean-square
error over seeds, the mean error and reported MCSE, the mean of MCSE² × evaluations (the
variance at one evaluation's cost: lower is more efficient) and the same with the training's
evaluations left out (as if a trained sampler were reused for free), the largest ``|error| / MCSE`` and how many runs raised
``UnreliableEvidenceWarning``. Results and conclusions: benchmarks/reports/benchmarks.md ("When does it
pay on PyMC models?").
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

DEFAULT_CASES = (
    "linreg_d2",
    "linreg_d10",
    "nig_d6",
    "eight_schools_noncentered",
    "logistic_n50_d3",
)
MCD_METHODS = {
    "mcd": {"method": "mcd"},
    "ula": {"method": "ula"},
    "uha": {"method": "uha"},
    "mcd_t100": {"method": "mcd", "train_steps": 100},
}
LABELS = {
    "mcd": "sample_mcd (MCD, defaults)",
    "ula": "sample_mcd(method='ula')",
    "uha": "sample_mcd(method='uha')",
    "mcd_t100": "sample_mcd(train_steps=100)",
    "smc": "sample_smc (defaults)",
    "crais": "sample_crais (defaults)",
    "smc_eq": "sample_smc, MCD's cost",
    "crais_eq": "sample_crais, MCD's cost",
}
ORDER = list(LABELS)
EXTRA_EVALS = ("n_logp_evals_tune", "n_logp_evals_pilot")


def total_evals(idata, method: str) -> int:
    """Model evaluations of a run, summed over chains (see the module docstring)."""
    st = idata.sample_stats
    n = int(np.sum(st["n_logp_evals"].values)) + sum(int(st.attrs.get(k, 0)) for k in EXTRA_EVALS)
    if method not in MCD_METHODS:  # sample_mcd counts its Laplace fit in chain 0 already
        n += int(st.attrs.get("n_logp_evals_laplace", 0))
    return n


def run(case_name: str, method: str, seed: int, draws: int | None = None) -> dict:
    """One sampler call on a fresh model of the case; returns its record."""
    import pymc_crais as pmc
    from pymc_crais.validation import get_case

    inst = get_case(case_name).build()
    common = {"model": inst.model, "random_seed": seed, "chains": 2, "progressbar": False}
    base = method.removesuffix("_eq")
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if method in MCD_METHODS:
            idata = pmc.sample_mcd(**common, **MCD_METHODS[method])
        elif base == "smc":
            idata = pmc.sample_smc(**common, cores=1, **({"draws": draws} if draws else {}))
        elif base == "crais":
            idata = pmc.sample_crais(**common, cores=1, **({"draws": draws} if draws else {}))
        else:
            raise ValueError(f"unknown method {method!r}")
    wall = time.perf_counter() - t0
    log_z, mcse = pmc.log_marginal_likelihood(idata)
    st = idata.sample_stats
    return {
        "case": case_name,
        "method": method,
        "seed": seed,
        "draws": int(idata.posterior.sizes["draw"]),
        "reference": inst.log_z,
        "reference_mcse": inst.log_z_mcse,
        "log_z": float(log_z),
        "mcse": float(mcse),
        "error": float(log_z - inst.log_z),
        "evals": total_evals(idata, method),
        "evals_training": int(np.sum(st["n_logp_evals_training"].values))
        if "n_logp_evals_training" in st
        else 0,
        "unreliable": sum(type(w.message).__name__ == "UnreliableEvidenceWarning" for w in caught),
        "warnings": sorted({type(w.message).__name__ for w in caught}),
        "wall_s_contended": wall,
    }


def load(path: Path) -> list[dict]:
    return json.loads(path.read_text()) if path.exists() else []


def save(path: Path, recs: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(recs, indent=1) + "\n")


def table(recs: list[dict]) -> str:
    """Markdown table: one row per case and method, statistics over seeds."""
    lines = [
        (
            "| case | method | seeds | model evals (mean) | of which training | RMSE (nat) | "
            "mean error | mean MCSE | MCSE² × evals | same, training excluded | "
            "max abs(error)/MCSE | warned |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    cases = list(dict.fromkeys(r["case"] for r in recs))
    for case in cases:
        for m in ORDER:
            rs = [r for r in recs if r["case"] == case and r["method"] == m]
            if not rs:
                continue
            err = np.array([r["error"] for r in rs])
            mcse = np.array([r["mcse"] for r in rs])
            ratio = np.max(np.abs(err) / np.maximum(mcse, 1e-300))
            lines.append(
                f"| {case} | {LABELS[m]} | {len(rs)} | {np.mean([r['evals'] for r in rs]):,.0f} | "
                f"{np.mean([r['evals_training'] for r in rs]):,.0f} | "
                f"{np.sqrt(np.mean(err**2)):.4f} | {np.mean(err):+.4f} | {np.mean(mcse):.4f} | "
                f"{np.mean(mcse**2 * np.array([r['evals'] for r in rs])):.3g} | "
                f"{np.mean(mcse**2 * np.array([r['evals'] - r['evals_training'] for r in rs])):.3g} | "
                f"{ratio:.1f} | {sum(r['unreliable'] > 0 for r in rs)}/{len(rs)} |"
            )
    refs = {r["case"]: r["reference_mcse"] for r in recs if r["reference_mcse"] > 0}
    if refs:
        lines.append("")
        lines.append(
            "Reference (not exact) log Z, its own MCSE: "
            + ", ".join(f"{c} {s:.4f}" for c, s in refs.items())
        )
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--cases", default=",".join(DEFAULT_CASES))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--methods", default="mcd,ula,uha,mcd_t100")
    ap.add_argument("--no-equal", action="store_true", help="skip the equal-cost SMC/CR-AIS runs")
    ap.add_argument("--results", default=str(REPO / "benchmarks" / "out" / "mcd_suite.json"))
    ap.add_argument("--from", dest="from_path", default=None, help="only print a saved file")
    args = ap.parse_args(argv)
    if args.from_path:
        print(table(load(Path(args.from_path))))
        return
    path = Path(args.results)
    recs = load(path)
    mcd_methods = [m for m in args.methods.split(",") if m]
    for case in args.cases.split(","):
        for seed in range(1, args.seeds + 1):
            plan = [(m, None) for m in mcd_methods] + [("smc", None), ("crais", None)]
            if not args.no_equal:
                plan += [("smc_eq", "smc"), ("crais_eq", "crais")]
            for method, scale_from in plan:
                if any(
                    r["case"] == case and r["method"] == method and r["seed"] == seed for r in recs
                ):
                    continue
                draws = None
                if scale_from:
                    ref = {r["method"]: r for r in recs if r["case"] == case and r["seed"] == seed}
                    if "mcd" not in ref or scale_from not in ref:
                        print(f"skip {case} {method} {seed}: needs the mcd and {scale_from} runs")
                        continue
                    base = ref[scale_from]
                    draws = max(2, round(base["draws"] * ref["mcd"]["evals"] / base["evals"]))
                rec = run(case, method, seed, draws)
                recs.append(rec)
                save(path, recs)
                print(
                    f"{case} {method} seed {seed}: error {rec['error']:+.4f} ± {rec['mcse']:.4f} "
                    f"evals {rec['evals']:,} draws {rec['draws']} "
                    f"({rec['wall_s_contended']:.0f} s contended) {rec['warnings']}",
                    flush=True,
                )
    print(table(recs))


if __name__ == "__main__":
    main()
