"""Seed 004 (Grosse, Maddison & Salakhutdinov 2013), first experiment, and thermodynamic-length
schedules from a pilot.

Part 1 (``--part gaussian``): AIS between two distant, strongly correlated 2-D Gaussians
(both normalized, so the exact ``log Z = 0``), for the geometric (GA) and moment-averaging
(MA) paths, the linear and the optimal binned schedule (10 evenly spaced bins,
``K_j ∝ √F_j``), with perfect transitions (exact draws of every intermediate Gaussian) and
with one systematic-scan Gibbs sweep per intermediate distribution, for 10 to 1,000
intermediate distributions. Reconstructed parameters (docs/paths.md says why):
``p0 = N((−10, 0), [[1, −0.85], [−0.85, 1]])``, ``p1 = N((10, 0), [[1, 0.85], [0.85, 1]])``;
``n`` intermediate distributions means ``K = n + 1`` AIS steps.

Part 2 (``--part schedule``): the thermodynamic-length schedule from a pilot's estimates of
the variance of the increments, against the linear schedule and the paper's binned rule, on
the same pair (exact bias ``Σ KL`` and Gibbs-transition estimates).

Part 3 (``--part synthetic``): the same rule on one synthetic target
(``pymc_crais/validation/synthetic_targets.py``) with the core :func:`~pymc_crais.core.anneal` loop:
a geometric-path pilot records ``Var_τ(Δ)`` at its stages, and final AIS runs on the
linear, exponential and thermodynamic schedules are compared at equal steps.

Commands (docs/paths.md):

    nice -n 10 python -m benchmarks.bench_moment_averaging --part gaussian
    nice -n 10 python -m benchmarks.bench_moment_averaging --part schedule
    nice -n 10 python -m benchmarks.bench_moment_averaging --part synthetic
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from benchmarks.studies.moment_averaging import (
    Gaussian,
    ais_log_weights,
    expected_log_weight,
    log_mean_exp,
    log_weight_variance,
    make_gaussian_path,
    optimal_binned_schedule,
)
from pymc_crais.core.schedules.thermodynamic import fisher_metric, thermodynamic_schedule

RHO = 0.85
N_INTERMEDIATE = (10, 15, 25, 40, 65, 100, 250, 500, 1000)
PATH_LABEL = {"geometric": "GA", "moment_averaging": "MA"}


def paper_pair() -> tuple[Gaussian, Gaussian]:
    """The reconstructed endpoints of the paper's Fig. 1 / Section 5.1."""
    p0 = Gaussian(np.array([-10.0, 0.0]), np.array([[1.0, -RHO], [-RHO, 1.0]]))
    p1 = Gaussian(np.array([10.0, 0.0]), np.array([[1.0, RHO], [RHO, 1.0]]))
    return p0, p1


def schedule_for(path, kind: str, k: int) -> np.ndarray:
    if kind == "linear":
        return np.linspace(0.0, 1.0, k + 1)
    if kind == "binned":
        return optimal_binned_schedule(path, k, n_bins=10)
    raise ValueError(kind)


def _bootstrap_ci(log_w: np.ndarray, rng: np.random.Generator, b: int = 200) -> tuple[float, float]:
    idx = rng.integers(0, log_w.size, size=(b, log_w.size))
    boots = np.array([log_mean_exp(log_w[i]) for i in idx])
    return float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))


def part_gaussian(args) -> dict:
    p0, p1 = paper_pair()
    rng = np.random.default_rng(args.seed)
    rows = []
    for transition in ("exact", "gibbs"):
        for name in ("geometric", "moment_averaging"):
            path = make_gaussian_path(name, p0, p1)
            for kind in ("linear", "binned"):
                for n in N_INTERMEDIATE:
                    k = n + 1
                    taus = schedule_for(path, kind, k)
                    ests, means, vars_ = [], [], []
                    ci = None
                    for r in range(args.reps):
                        lw = ais_log_weights(
                            rng, path, taus, args.n_particles, transition=transition
                        )
                        ests.append(log_mean_exp(lw))
                        means.append(float(lw.mean()))
                        vars_.append(float(lw.var()))
                        if r == 0:
                            ci = _bootstrap_ci(lw, rng)
                    row = {
                        "transition": transition,
                        "path": name,
                        "schedule": kind,
                        "n": n,
                        "K": k,
                        "log_z": ests,
                        "mean_log_w": means,
                        "var_log_w": vars_,
                        "ci_first": ci,
                        "exact_mean_log_w": expected_log_weight(path, taus),
                        "exact_var_log_w": log_weight_variance(path, taus),
                    }
                    rows.append(row)
                    print(
                        f"{transition:5s} {PATH_LABEL[name]} {kind:6s} n={n:4d} "
                        f"logZ^ {np.mean(ests):8.2f} [{min(ests):7.2f}, {max(ests):7.2f}] "
                        f"E[log w] {np.mean(means):8.2f} (exact {row['exact_mean_log_w']:8.2f}) "
                        f"Var {np.mean(vars_):9.1f} (exact-transitions formula "
                        f"{row['exact_var_log_w']:9.1f})",
                        flush=True,
                    )
    return {"rows": rows}


def plot_gaussian(result: dict, out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    styles = {
        ("geometric", "linear"): ("tab:blue", "-", "GA linear"),
        ("geometric", "binned"): ("tab:blue", "--", "GA optimal binned"),
        ("moment_averaging", "linear"): ("tab:red", "-", "MA linear"),
        ("moment_averaging", "binned"): ("tab:red", "--", "MA optimal binned"),
    }
    for ax, transition, title in zip(
        axes, ("exact", "gibbs"), ("perfect transitions", "one Gibbs sweep per distribution")
    ):
        for (name, kind), (color, ls, label) in styles.items():
            rows = [
                r
                for r in result["rows"]
                if r["transition"] == transition and r["path"] == name and r["schedule"] == kind
            ]
            n = np.array([r["n"] for r in rows])
            est = np.array([np.mean(r["log_z"]) for r in rows])
            lo = np.array([min(r["log_z"]) for r in rows])
            hi = np.array([max(r["log_z"]) for r in rows])
            ax.plot(n, est, color=color, ls=ls, marker="o", ms=3, label=label)
            ax.fill_between(n, lo, hi, color=color, alpha=0.12)
        ax.axhline(0.0, color="k", lw=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("intermediate distributions")
        ax.set_title(title)
    axes[0].set_ylabel("log Ẑ (truth 0)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def pilot_metric(path, grid: np.ndarray, n: int, rng: np.random.Generator, h=1e-6) -> np.ndarray:
    """``G(τ_i) = Var[∂_τ log f_τ]`` at each grid point from ``n`` exact draws of ``p_{τ_i}``.

    The score is a central difference with a tiny ``h`` (the local derivative, which for the
    package's own paths is :func:`~pymc_crais.core.schedules.thermodynamic.path_score`; for the
    geometric path it is ``Δ`` itself). The variance of the *secant* increments over a coarse
    grid underestimates ``G`` where it changes fast (the MA path's ends) and gives a poor
    schedule there.
    """
    out = np.empty(grid.size)
    for i, t in enumerate(grid):
        x = path.at(float(t)).sample(rng, n)
        lo, hi = max(t - h, 0.0), min(t + h, 1.0)
        u = (path.at(hi).log_density(x) - path.at(lo).log_density(x)) / (hi - lo)
        out[i] = fisher_metric(u)
    return out


def end_dense_grid(n: int, smallest: float = 1e-3) -> np.ndarray:
    """``n`` points from 0 to 1, log-spaced towards both ends (``smallest`` from each end)."""
    half = np.geomspace(smallest, 0.5, n // 2)
    return np.unique(np.concatenate([[0.0], half, 1.0 - half, [1.0]]))


def part_schedule(args) -> dict:
    p0, p1 = paper_pair()
    rng = np.random.default_rng(args.seed + 1)
    grids = {
        "linear grid": np.linspace(0.0, 1.0, args.pilot_grid),
        "end-dense grid": end_dense_grid(args.pilot_grid),
    }
    rows = []
    for name in ("geometric", "moment_averaging"):
        path = make_gaussian_path(name, p0, p1)
        metrics = {g: pilot_metric(path, grid, args.pilot_n, rng) for g, grid in grids.items()}
        for k in (11, 26, 101, 1001):
            scheds = {
                "linear": np.linspace(0.0, 1.0, k + 1),
                "binned (exact F_j)": optimal_binned_schedule(path, k, n_bins=10),
            }
            for g, grid in grids.items():
                scheds[f"pilot, {g}"] = thermodynamic_schedule(grid, metrics[g], k)
            for label, taus in scheds.items():
                bias = -expected_log_weight(path, taus)
                ests = [
                    log_mean_exp(
                        ais_log_weights(rng, path, taus, args.n_particles, transition="gibbs")
                    )
                    for _ in range(args.reps)
                ]
                rows.append(
                    {"path": name, "K": k, "schedule": label, "bias": bias, "gibbs_log_z": ests}
                )
                print(
                    f"{PATH_LABEL[name]} K={k:5d} {label:24s} exact Σ KL {bias:9.3f}  "
                    f"Gibbs log Ẑ {np.mean(ests):8.2f} [{min(ests):7.2f}, {max(ests):7.2f}]",
                    flush=True,
                )
    return {"rows": rows, "pilot_grid": args.pilot_grid, "pilot_n": args.pilot_n}


def part_synthetic(args) -> dict:
    from pymc_crais.core import HMC, anneal, make_path
    from pymc_crais.core.schedules import FixedSchedule, exponential_schedule
    from pymc_crais.core.schedules.thermodynamic import path_score
    from pymc_crais.validation.synthetic_targets import make_density, make_target

    class RecordingSchedule(FixedSchedule):
        """A fixed schedule that records ``Var_τ(Δ)`` (weighted) at every stage it leaves."""

        def __init__(self, taus):
            super().__init__(taus, name="pilot")
            self.tau, self.metric = [], []

        def next_tau(self, stage, tau, state=None, log_weights=None, path=None):
            self.tau.append(float(tau))
            self.metric.append(fisher_metric(path_score(state.delta, tau), log_weights))
            return super().next_tau(stage, tau, state, log_weights, path)

    target = make_target(args.target, args.dim)
    density = make_density(target)
    path = make_path(0.0)
    out = {"target": args.target, "dim": args.dim, "rows": []}
    rng = np.random.default_rng(args.seed + 2)
    rec = RecordingSchedule(exponential_schedule(args.pilot_steps, tau_min=1e-4))
    x0 = density.sample_q0(rng, args.pilot_particles)
    pilot = anneal(rng, density, x0, path, rec, HMC())
    grid = np.array(rec.tau + [1.0])
    metric = np.array(rec.metric + [rec.metric[-1]])
    pilot_evals = pilot.n_logp_evals
    print(
        f"pilot: {args.pilot_steps} steps, {args.pilot_particles} particles, "
        f"log Ẑ {pilot.log_marginal_likelihood:.2f}, {pilot_evals} evaluations"
    )
    k = args.steps
    scheds = {
        "linear": np.linspace(0.0, 1.0, k + 1),
        "exponential": exponential_schedule(k, tau_min=1e-4),
        "thermodynamic": thermodynamic_schedule(grid, metric, k),
    }
    for label, taus in scheds.items():
        errs = []
        for s in range(args.reps):
            r = np.random.default_rng([args.seed, 100 + s])
            x0 = density.sample_q0(r, args.particles)
            res = anneal(r, density, x0, path, FixedSchedule(taus, name=label), HMC())
            errs.append(res.log_marginal_likelihood - target.log_z)
        out["rows"].append({"schedule": label, "K": k, "errors": errs})
        print(
            f"{args.target} d={args.dim} K={k} {label:14s} error mean {np.mean(errs):8.3f} "
            f"sd {np.std(errs, ddof=1):6.3f} (|max| {np.max(np.abs(errs)):.3f})",
            flush=True,
        )
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("gaussian", "schedule", "synthetic"), default="gaussian")
    ap.add_argument("--n-particles", type=int, default=5000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seed", type=int, default=2013)
    ap.add_argument("--pilot-grid", type=int, default=21)
    ap.add_argument("--pilot-n", type=int, default=500)
    ap.add_argument("--target", default="normal")
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--particles", type=int, default=256)
    ap.add_argument("--pilot-steps", type=int, default=32)
    ap.add_argument("--pilot-particles", type=int, default=256)
    ap.add_argument("--figure", default="docs/img/moment_averaging_gaussians.png")
    ap.add_argument("--json", default=None, help="write the raw results here")
    args = ap.parse_args(argv)
    if args.part == "gaussian":
        result = part_gaussian(args)
        plot_gaussian(result, args.figure)
    elif args.part == "schedule":
        result = part_schedule(args)
    else:
        result = part_synthetic(args)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)


if __name__ == "__main__":
    main()
