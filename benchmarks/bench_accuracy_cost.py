"""Accuracy against cost: log Z against target evaluations on Pima and Sonar (as Figure 3 of the CR-AIS paper).

    python benchmarks/bench_accuracy_cost.py [--data pima|sonar|both] [--quick] [--chains 4]
        [--draws 256] [--out benchmarks/out/accuracy_cost] [--plot-only]

Model: ``pymc_crais.models.logistic_regression(X, y, prior_sd=5.0)`` on the standardized
predictors of ``load_pima`` (d = 8) or ``load_sonar`` (d = 60); reference evidences from
``/work/shared/data/README.md`` (Pima -438.981 +- 0.01, Sonar -144.51 +- 0.05). All our
methods start from the prior (``init="prior"``, the paper's q0), use the package's default
kernel (HMC, 3 leapfrog steps, step size and mass tuned per stage), ``--draws`` particles and
``--chains`` chains (``cores=1``) with the same seed. Each method runs over a grid of its
cost parameter:

* **CR-AIS, interpolated**: ``sample_crais(delta="auto", n_steps=M)``: δ from the pilot so
  that the tuning run has about ``max(32, M/4)`` steps, the tuned schedule interpolated to M.
* **CR-AIS, tuned schedule**: ``sample_crais(delta=δ, n_steps=None)`` over a δ grid: the
  final run re-uses the tuning run's schedule as it is (M ∝ 1/δ).
* **Adaptive AIS**: ``sample_ais(schedule="ess"|"cess", rho=ρ)`` over a ρ grid.
* **Fixed schedules**: ``sample_ais(schedule="linear"|"sigmoid"|"exponential", n_steps=M)``.
* **pm.sample_smc**: PyMC's own SMC (default IMH kernel, threshold 0.5) over a grid of draws.
  PyMC does not report how often it evaluates the model, so the kernel is subclassed to count:
  one target evaluation = one call of the prior and the likelihood function for one particle.
  PyMC evaluates all N initial particles once, then at each stage its ``mutate`` loop proposes
  N points per round and keeps going while the particles' correlation with the stage start
  still falls; its counter ``n_steps`` starts at 1 and grows by one per round, so a stage costs
  ``N (n_steps - 1)`` and a chain ``N (1 + Σ_stages (n_steps_s - 1))``. PyMC saves only the
  last stage's ``n_steps`` (as ``_n_tune``), hence the subclass.

Cost (x-axis) = target evaluations per chain, every one counted: our samplers' per-chain
``sample_stats.n_logp_evals`` (the mean over chains for adaptive schedules) plus, for CR-AIS,
the whole pilot (``n_logp_evals_pilot``) and tuning run (``n_logp_evals_tune``) -- those are
shared by the chains of one call but charged in full to each, as a single-chain user pays them.
Estimate (y-axis) = the package's combined ``log Z`` (``pymc_crais.log_marginal_likelihood``:
log of the mean of the chains' Z) with its MCSE; for ``pm.sample_smc`` the same combination of
each chain's last ``log_marginal_likelihood`` (between-chain MCSE only). Raw results go to
``OUT/results.json`` after every run (re-running skips what is there; ``--plot-only`` just
redraws); PNGs to ``docs/img/accuracy_cost_{pima,sonar}.png``. Prints a table per data set
and the evaluations each method needs to stay within |error| <= 0.1 / 0.3 / 1.
No assertion: numbers go to benchmarks/reports/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import ClassVar

import numpy as np

REFERENCES = {"pima": (-438.981, 0.01), "sonar": (-144.51, 0.05)}
THRESHOLDS = (0.1, 0.3, 1.0)
M_GRID = (16, 32, 64, 128, 256, 512, 1024)
# on Pima the ESS/CESS rules need rho close to 1 to reach the errors CR-AIS reaches
RHO_GRID = {"pima": (0.5, 0.7, 0.9, 0.95, 0.99, 0.995, 0.998), "sonar": (0.5, 0.7, 0.9, 0.95, 0.99)}
# δ grids chosen to span tuning runs of ~45 to ~500-1000 steps (δ's scale is problem dependent;
# on Pima every δ >= ~250 gives ~45 steps, on Sonar δ = 4096 gives ~50).
DELTA_GRID = {"pima": (256, 64, 16, 8), "sonar": (16384, 4096, 1024, 256, 64)}
# pm.sample_smc evaluates particle by particle (~2k evaluations/s here): fewer draw counts on Sonar
SMC_DRAWS = {"pima": (256, 512, 1024), "sonar": (256, 1024)}

REPO = Path(__file__).resolve().parents[1]

# label -> (family, colour, marker)
STYLE = {
    "CR-AIS interpolated": ("CR-AIS", "C3", "o"),
    "CR-AIS tuned schedule": ("CR-AIS", "C1", "D"),
    "AIS ESS": ("adaptive AIS", "C0", "s"),
    "AIS CESS": ("adaptive AIS", "C9", "v"),
    "AIS linear": ("fixed AIS", "C2", "^"),
    "AIS sigmoid": ("fixed AIS", "C4", "<"),
    "AIS exponential": ("fixed AIS", "C5", ">"),
    "pm.sample_smc IMH": ("PyMC SMC", "k", "x"),
}


def make_plan(data: str, quick: bool, pima_fixed_max: int) -> list[tuple[str, str, float]]:
    """The runs of one data set as ``(label, parameter name, value)``.

    Round-robin over the methods' grids (every method's cheapest point first, then every
    method's second...), so that a run cut short still covers all methods at low cost.
    """
    if quick:
        ms, rhos, deltas, smc = (16, 32), (0.5, 0.9), DELTA_GRID[data][:2], (128,)
    else:
        ms, rhos, deltas, smc = M_GRID, RHO_GRID[data], DELTA_GRID[data], SMC_DRAWS[data]
    grids = [
        [("CR-AIS interpolated", "n_steps", m) for m in ms],
        [("CR-AIS tuned schedule", "delta", d) for d in deltas],
        [("AIS ESS", "rho", r) for r in rhos],
        [("AIS CESS", "rho", r) for r in rhos],
    ]
    for sched in ("linear", "sigmoid", "exponential"):
        cap = pima_fixed_max if (data == "pima" and sched != "linear") else max(ms)
        grids.append([(f"AIS {sched}", "n_steps", m) for m in ms if m <= cap])
    grids.append([("pm.sample_smc IMH", "draws", n) for n in smc])
    return [g[i] for i in range(max(map(len, grids))) for g in grids if i < len(g)]


def _key(data, label, param, value) -> str:
    return f"{data}|{label}|{param}={value:g}"


def _counting_imh():
    """PyMC's IMH kernel with a count of target evaluations per chain (see module doc)."""
    from pymc.smc.kernels import IMH

    class CountingIMH(IMH):
        counts: ClassVar[list] = []  # one [evaluations, stages] per chain, in order (cores=1)

        def _initialize_kernel(self):
            super()._initialize_kernel()
            type(self).counts.append([self.draws, 0])

        def mutate(self):
            super().mutate()
            c = type(self).counts[-1]
            c[0] += (self.n_steps - 1) * self.draws
            c[1] += 1

    CountingIMH.counts = []
    return CountingIMH


def run_one(model, data: str, label: str, param: str, value, args) -> dict:
    """One sampler call; returns the record stored in results.json."""
    import pymc as pm

    import pymc_crais as pmc
    from pymc_crais.core.estimators import combine_chain_estimates

    common = {"model": model, "draws": args.draws, "chains": args.chains, "cores": 1, "random_seed": args.seed,
              "progressbar": False}
    ref = REFERENCES[data][0]
    t0 = time.perf_counter()
    rec = {"data": data, "label": label, "family": STYLE[label][0], "param": param, "value": value}
    if label == "pm.sample_smc IMH":
        kern = _counting_imh()
        with model:
            idata = pm.sample_smc(
                draws=int(value), kernel=kern, chains=args.chains, cores=1, random_seed=args.seed,
                progressbar=False, compute_convergence_checks=False,
            )
        lml = idata["sample_stats"]["log_marginal_likelihood"].values
        log_z = np.array([float(np.asarray(row, dtype=float)[-1]) for row in lml])
        lz, mcse, det = combine_chain_estimates(log_z)
        evals = np.array([c[0] for c in kern.counts], dtype=float)
        rec.update(
            particles=int(value), evals_final=evals.tolist(), evals_tune=0, evals_pilot=0,
            n_steps=float(np.mean([c[1] for c in kern.counts])), sampling_s=float(idata["sample_stats"].attrs["_t_sampling"]),
        )
    else:
        if label == "CR-AIS interpolated":
            idata = pmc.sample_crais(n_steps=int(value), delta="auto", **common)
        elif label == "CR-AIS tuned schedule":
            idata = pmc.sample_crais(n_steps=None, delta=float(value), **common)
        elif label in ("AIS ESS", "AIS CESS"):
            idata = pmc.sample_ais(schedule=label.split()[1].lower(), rho=float(value), **common)
        else:
            idata = pmc.sample_ais(schedule=label.split()[1], n_steps=int(value), **common)
        ss = idata["sample_stats"]
        attrs = dict(ss.attrs)
        log_z = np.asarray(ss["log_marginal_likelihood"].values, dtype=float)
        lz, mcse, det = pmc.log_marginal_likelihood(idata, return_details=True)
        evals = np.asarray(ss["n_logp_evals"].values, dtype=float)
        rec.update(
            particles=args.draws, evals_final=evals.tolist(),
            evals_tune=int(attrs.get("n_logp_evals_tune", 0)), evals_pilot=int(attrs.get("n_logp_evals_pilot", 0)),
            n_steps=float(np.mean(ss["n_stages"].values)), sampling_s=float(attrs["sampling_time"]),
            delta=attrs.get("delta"), n_tune_steps=attrs.get("n_tune_steps"),
            hit_max_steps=bool(np.any(ss["hit_max_steps"].values)),
            # CR-AIS: "linear" when a capped tuning run handed over to a linear schedule
            schedule=attrs.get("schedule"), schedule_fallback=attrs.get("schedule_fallback", ""),
        )
    wall = time.perf_counter() - t0
    rec.update(
        chains=args.chains, seed=args.seed, log_z_chains=log_z.tolist(), log_z=float(lz), mcse=float(mcse),
        mcse_within=float(det.get("mcse_within", np.nan)), mcse_between=float(det.get("mcse_between", np.nan)),
        error=float(lz - ref), rmse_chains=float(np.sqrt(np.mean((log_z - ref) ** 2))),
        mean_log_z_chains=float(np.mean(log_z)),
        evals_per_chain=float(np.mean(rec["evals_final"]) + rec["evals_tune"] + rec["evals_pilot"]),
        wall_s=wall, overhead_s=wall - rec["sampling_s"], loadavg=list(os.getloadavg()),
    )
    return rec


def load_results(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {"meta": {}, "runs": {}}


def save_results(path: Path, results: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=1, default=float))
    tmp.replace(path)


def evals_to_reach(recs: list[dict], thr: float, key: str = "error"):
    """Smallest cost from which every more expensive run of the method has |error| <= thr.

    Returns ``(cost or None, best |error| and its cost)``.
    """
    recs = sorted(recs, key=lambda r: r["evals_per_chain"])
    errs = [abs(r[key]) for r in recs]
    cost = None
    for i in range(len(recs) - 1, -1, -1):
        if errs[i] <= thr:
            cost = recs[i]["evals_per_chain"]
        else:
            break
    j = int(np.argmin(errs))
    return cost, (errs[j], recs[j]["evals_per_chain"])


def _fmt_evals(x) -> str:
    if x is None:
        return "—"
    return f"{x / 1e6:.2f} M" if x >= 1e6 else f"{x / 1e3:.0f} k"


def print_tables(results: dict, data: str) -> None:
    runs = [r for r in results["runs"].values() if r["data"] == data]
    if not runs:
        return
    ref = REFERENCES[data][0]
    print(f"\n== {data}: reference log Z = {ref} ==")
    print(f"{'method':24s} {'param':>12s} {'M':>7s} {'evals/chain':>12s} {'log Z':>10s} {'MCSE':>7s} {'error':>8s} "
          f"{'RMSE ch':>8s} {'wall s':>7s}")
    for label in STYLE:
        for r in sorted((r for r in runs if r["label"] == label), key=lambda r: r["evals_per_chain"]):
            print(f"{label:24s} {r['param'] + '=' + format(r['value'], 'g'):>12s} {r['n_steps']:7.1f} "
                  f"{r['evals_per_chain']:12.0f} {r['log_z']:10.3f} {r['mcse']:7.3f} {r['error']:+8.3f} "
                  f"{r['rmse_chains']:8.3f} {r['wall_s']:7.1f}")
    print("\nEvaluations per chain from which |error| stays <= thr (combined estimate / per-chain RMSE):")
    print(f"{'method':24s} " + " ".join(f"{'<= ' + format(t, 'g'):>19s}" for t in THRESHOLDS) + "   best |error| (evals)")
    for label in STYLE:
        recs = [r for r in runs if r["label"] == label]
        if not recs:
            continue
        cells = []
        for t in THRESHOLDS:
            a, _ = evals_to_reach(recs, t, "error")
            b, _ = evals_to_reach(recs, t, "rmse_chains")
            cells.append(f"{_fmt_evals(a):>9s} / {_fmt_evals(b):>7s}")
        _, (best, at) = evals_to_reach(recs, 0.0)
        print(f"{label:24s} " + " ".join(f"{c:>19s}" for c in cells) + f"   {best:.3f} ({_fmt_evals(at)})")


def markdown_table(results: dict, data: str) -> str:
    """The threshold table of ``print_tables`` as Markdown (for benchmarks/reports/benchmarks.md)."""
    runs = [r for r in results["runs"].values() if r["data"] == data]
    lines = [
        "| method | grid | \\|err\\| ≤ 0.1 | ≤ 0.3 | ≤ 1 | best \\|err\\| (evals) | best RMSE (evals) |",
        "|---|---|---|---|---|---|---|",
    ]
    for label in STYLE:
        recs = [r for r in runs if r["label"] == label]
        if not recs:
            continue
        vals = sorted({r["value"] for r in recs})
        grid = f"{recs[0]['param']} ∈ {{{', '.join(format(v, 'g') for v in vals)}}}"
        cells = [f"{_fmt_evals(evals_to_reach(recs, t)[0])} / {_fmt_evals(evals_to_reach(recs, t, 'rmse_chains')[0])}"
                 for t in THRESHOLDS]
        _, (best, at) = evals_to_reach(recs, 0.0)
        _, (best_r, at_r) = evals_to_reach(recs, 0.0, "rmse_chains")
        lines.append(f"| {label} | {grid} | " + " | ".join(cells)
                     + f" | {best:.2g} ({_fmt_evals(at)}) | {best_r:.2g} ({_fmt_evals(at_r)}) |")
    return "\n".join(lines)


def plot(results: dict, data: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [r for r in results["runs"].values() if r["data"] == data]
    if not runs:
        return
    ref, ref_sd = REFERENCES[data]
    meta = results.get("meta", {})
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5.8))
    # log Z axis stretched like asinh((y - ref) / s): linear within ~s of the reference,
    # logarithmic beyond, so that errors of 0.1 and of 500 nats fit one panel
    s = 0.3
    ax1.set_yscale("function", functions=(lambda y: np.arcsinh((y - ref) / s), lambda u: ref + s * np.sinh(u)))
    for label, (_, colour, marker) in STYLE.items():
        recs = sorted((r for r in runs if r["label"] == label), key=lambda r: r["evals_per_chain"])
        if not recs:
            continue
        x = np.array([r["evals_per_chain"] for r in recs])
        y = np.array([r["log_z"] for r in recs])
        e = np.array([r["mcse"] for r in recs])
        ls = "--" if label.startswith("pm.") else "-"
        ax1.errorbar(x, y, yerr=e, color=colour, marker=marker, ls=ls, ms=5, capsize=2, lw=1.2, label=label)
        ax2.plot(x, np.abs(y - ref), color=colour, marker=marker, ls=ls, ms=5, lw=1.2, label=label)
    ax1.axhline(ref, color="0.3", lw=1)
    ax1.axhspan(ref - ref_sd, ref + ref_sd, color="0.7", alpha=0.5)
    lo = min(r["log_z"] - r["mcse"] for r in runs)
    hi = max(r["log_z"] + r["mcse"] for r in runs)
    offsets = np.array([0.1, 0.3, 1, 3, 10, 30, 100, 300, 1000])
    offsets = offsets[offsets >= (max(hi, ref) - lo) / 1000]  # no crowd of ticks at the reference
    ticks = np.concatenate([ref - offsets[::-1], [ref], ref + offsets])
    ticks = ticks[(ticks >= lo - 1) & (ticks <= max(hi, ref) + 1)]
    ax1.set_yticks(ticks, [f"{t:.1f}" if abs(t - ref) < 1 and t != ref else f"{t:.0f}" if t != ref else f"{t:.3f}"
                           for t in ticks])
    fwd = lambda y: np.arcsinh((y - ref) / s)
    bwd = lambda u: ref + s * np.sinh(u)
    ax1.set_ylim(bwd(fwd(lo) - 0.3), bwd(fwd(max(hi, ref + 0.3)) + 0.3))
    ax1.set_xscale("log")
    ax1.set_xlabel("target evaluations per chain (incl. pilot and tuning)")
    ax1.set_ylabel("log Z estimate ± MCSE")
    ax1.set_title(f"{data.capitalize()}: log Z ± MCSE (reference {ref}; asinh-stretched axis)")
    for t in THRESHOLDS:
        ax2.axhline(t, color="0.6", lw=0.8, ls=":")
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    ax2.set_xlabel("target evaluations per chain (incl. pilot and tuning)")
    ax2.set_ylabel("|log Z estimate − reference|")
    ax2.set_title("|error| (dotted: 0.1, 0.3, 1)")
    handles, labels = ax2.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=9, frameon=False)
    fig.suptitle(
        f"q0 = prior, {meta.get('draws', '?')} particles (pm.sample_smc: its draws), {meta.get('chains', '?')} chains, "
        f"seed {meta.get('seed', '?')}; HMC 3 leapfrog (ours), IMH (PyMC)", fontsize=10,
    )
    fig.tight_layout(rect=(0, 0.09, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=("pima", "sonar", "both"), default="both")
    parser.add_argument("--quick", action="store_true", help="two grid points per method (a smoke test)")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--draws", type=int, default=256, help="particles per chain (our samplers)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "out" / "accuracy_cost"))
    parser.add_argument("--img", default=str(REPO / "docs" / "img"), help="folder of the PNGs")
    parser.add_argument("--plot-only", action="store_true", help="redraw from OUT/results.json")
    parser.add_argument("--markdown", action="store_true", help="also print the threshold tables as Markdown")
    parser.add_argument("--pima-fixed-max", type=int, default=256,
                        help="largest M of the sigmoid/exponential schedules on Pima (CPU budget)")
    args = parser.parse_args()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res_path = out / "results.json"
    results = load_results(res_path)
    datas = ("pima", "sonar") if args.data == "both" else (args.data,)

    if not args.plot_only:
        import pymc_crais as pmc
        from pymc_crais.datasets import load_pima, load_sonar
        from pymc_crais.models import logistic_regression
        from pymc_crais.samplers.engine.compile import compile_model_density

        meta = results["meta"]
        if meta and (meta.get("draws"), meta.get("chains"), meta.get("seed")) != (args.draws, args.chains, args.seed):
            raise SystemExit(f"{res_path} holds runs with other settings {meta}; use another --out")
        meta.update(
            draws=args.draws, chains=args.chains, seed=args.seed, quick=args.quick, machine=platform.machine(),
            cpus=os.cpu_count(), python=platform.python_version(), pymc_crais=pmc.__version__,
            pymc_crais_path=str(Path(pmc.__file__).parent),
        )
        for data in datas:
            d = (load_pima if data == "pima" else load_sonar)()
            model = logistic_regression(d.X, d.y, prior_sd=5.0)
            t = time.perf_counter()
            compile_model_density(model)
            meta[f"compile_s_{data}"] = time.perf_counter() - t
            print(f"[{data}] one compilation of the batched density: {meta[f'compile_s_{data}']:.2f} s "
                  f"(load {os.getloadavg()[0]:.2f})", flush=True)
            for label, param, value in make_plan(data, args.quick, args.pima_fixed_max):
                key = _key(data, label, param, value)
                if key in results["runs"]:
                    continue
                rec = run_one(model, data, label, param, value, args)
                results["runs"][key] = rec
                save_results(res_path, results)
                print(f"[{data}] {label:22s} {param}={value:<8g} evals/chain {rec['evals_per_chain']:>10.0f} "
                      f"log Z {rec['log_z']:9.3f} ± {rec['mcse']:.3f} (error {rec['error']:+.3f}) "
                      f"wall {rec['wall_s']:.1f} s (sampling {rec['sampling_s']:.1f} s) load {rec['loadavg'][0]:.2f}",
                      flush=True)

    for data in datas:
        print_tables(results, data)
        if args.markdown:
            print("\n" + markdown_table(results, data) + "\n")
        plot(results, data, Path(args.img) / f"accuracy_cost_{data}.png")


if __name__ == "__main__":
    main()
