"""RTS, TI, RB-TI and CR-AIS on the RTS paper's Gaussian-mixture example, at matched cost.

    python benchmarks/bench_rts_mixture.py [--reps 8] [--particles 500] [--temperatures 100]

Target: an equal mixture of two 10-d Gaussians with covariance 0.5 I whose means are 5
apart in the first coordinate (±2.5 e_1), times a constant ``e^LOG_C``; initial density
``q0 = N(0, 30 I)``. Exact ``log Z = LOG_C``. Everything runs on the NumPy core
(:class:`pymc_crais.core.density.FunctionDensity`), geometric path, HMC with 3 leapfrog
steps.

Per replicate (seed ``r``):

* **RTS** (``pymc_crais.core.rts.rts``) with ``K`` temperatures and ``--sweeps`` final
  sweeps, once on an exponential ladder (τ from 1e-3) and once on a ladder taken from a
  CR-AIS tuning run (interpolated to ``K`` levels; the tuning run's cost is added). TI and
  RB-TI come from the same draws, at no extra cost.
* **CR-AIS**: the pieces ``sample_crais`` uses, on the core: a geometric pilot (256
  particles, 32-step exponential schedule) gives ``T = log Ẑ − E_q0[Δ]``, a tuning run with
  ``δ = T / 64`` gives the schedule, and a final run of ``--particles`` fresh particles on it,
  interpolated to as many steps as make its *total* number of target evaluations (pilot +
  tuning + final) equal to that of the exponential-ladder RTS run of the same seed, with the
  tuning run's kernel parameters replayed.

Reports per method: mean error, RMSE over replicates, mean reported standard error, mean
target evaluations and wall time. No assertion: numbers go to benchmarks/reports/benchmarks.md.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from scipy.special import logsumexp

from pymc_crais.core.anneal import ParamsByTau, anneal
from pymc_crais.core.density import FunctionDensity
from pymc_crais.core.kernels import make_kernel
from pymc_crais.core.paths import make_path
from pymc_crais.core.rts import rts
from pymc_crais.core.schedules import (
    FixedSchedule,
    exponential_schedule,
    interpolate_schedule,
    make_fixed_schedule,
)
from pymc_crais.core.schedules.adaptive import ConstantRateSchedule

D = 10
S0 = 30.0
VAR = 0.5
MEANS = np.zeros((2, D))
MEANS[0, 0], MEANS[1, 0] = -2.5, 2.5
LOG_C = 4.0


def _log_q0(x):
    return -0.5 * np.sum(x * x, axis=1) / S0 - 0.5 * D * np.log(2 * np.pi * S0)


def _components(x):
    r = x[None, :, :] - MEANS[:, None, :]
    lc = np.log(0.5) - 0.5 * np.sum(r * r, axis=2) / VAR - 0.5 * D * np.log(2 * np.pi * VAR)
    return lc, r


def _log_target(x):
    return LOG_C + logsumexp(_components(x)[0], axis=0)


def _grad_target(x):
    lc, r = _components(x)
    w = np.exp(lc - logsumexp(lc, axis=0))
    return -np.einsum("kn,knd->nd", w, r) / VAR


def mixture_density() -> FunctionDensity:
    return FunctionDensity(
        D, _log_q0, _log_target, lambda x: -x / S0, _grad_target,
        lambda rng, n: rng.normal(0.0, np.sqrt(S0), size=(n, D)),
    )


def crais_schedule(rng, density, n_tune: int):
    """Pilot + constant-rate tuning run (as sample_crais does, α = 0); returns the tuned
    schedule, the tuning run's kernel parameters by τ, and the evaluations spent."""
    before = density.n_evals
    pilot = anneal(rng, density, density.sample_q0(rng, 256), make_path(0.0),
                   make_fixed_schedule(exponential_schedule(32, tau_min=1e-6)), make_kernel("hmc"))
    d0 = density.evaluate(density.sample_q0(rng, 256)).delta  # exact q0 draws: E_q0[Δ]
    total = max(pilot.log_marginal_likelihood - float(np.mean(d0)), 1e-12)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="max_steps=", category=RuntimeWarning)
        tune = anneal(rng, density, density.sample_q0(rng, 256), make_path(0.0),
                      ConstantRateSchedule(total / n_tune), make_kernel("hmc"), max_steps=4 * n_tune)
    tuned = np.concatenate([[0.0], tune.stages["tau"]])
    return tuned, ParamsByTau(tune.stages["tau"], tune.kernel_params), density.n_evals - before


def run_rts(seed, n, K, sweeps, ladder_kind):
    density = mixture_density()
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    if ladder_kind == "exponential":
        ladder = exponential_schedule(K - 1, tau_min=1e-3)
        extra = 0
    else:
        tuned, _, extra = crais_schedule(rng, density, K - 1)
        ladder = interpolate_schedule(tuned, K - 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        res = rts(rng, density, density.sample_q0(rng, n), make_path(0.0), ladder, make_kernel("hmc"),
                  n_sweeps=sweeps)
    w = np.exp(res.posterior_log_weights - logsumexp(res.posterior_log_weights))
    return {
        "evals": density.n_evals,
        "extra_evals": extra,
        "time": time.perf_counter() - t0,
        "RTS": (res.log_marginal_likelihood, np.sqrt(res.log_z_variance)),
        "TI": (res.log_z_ti, np.sqrt(res.log_z_ti_variance)),
        "RB-TI": (res.log_z_rbti, np.sqrt(res.log_z_rbti_variance)),
        "rounds": res.n_init_rounds,
        "warned": len(caught),
        "mode_share": float(w @ (res.posterior_x[:, 0] > 0)),
        "c_dev": float(np.max(np.abs(res.c_hat * K - 1.0))),
    }


def run_crais(seed, n, budget):
    density = mixture_density()
    rng = np.random.default_rng(10_000 + seed)
    t0 = time.perf_counter()
    tuned, replay, spent = crais_schedule(rng, density, 64)
    n_leap = make_kernel("hmc").n_leapfrog
    steps = max(int((budget - spent - n) / (n * n_leap)), 1)
    sched = FixedSchedule(interpolate_schedule(tuned, steps))
    res = anneal(rng, density, density.sample_q0(rng, n), make_path(0.0), sched, make_kernel("hmc"),
                 kernel_params=replay)
    return {
        "evals": density.n_evals,
        "time": time.perf_counter() - t0,
        "CR-AIS": (res.log_marginal_likelihood, np.sqrt(res.log_z_variance)),
        "steps": steps,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=8)
    ap.add_argument("--particles", type=int, default=500)
    ap.add_argument("--temperatures", type=int, default=100)
    ap.add_argument("--sweeps", type=int, default=200)
    args = ap.parse_args()
    rows = {}

    def add(name, value, se, evals, secs):
        rows.setdefault(name, []).append((value - LOG_C, se, evals, secs))

    for seed in range(args.reps):
        a = run_rts(seed, args.particles, args.temperatures, args.sweeps, "exponential")
        for m in ("RTS", "TI", "RB-TI"):
            add(f"{m} (exponential ladder)", *a[m], a["evals"], a["time"])
        b = run_rts(seed, args.particles, args.temperatures, args.sweeps, "constant_rate")
        for m in ("RTS", "TI", "RB-TI"):
            add(f"{m} (CR-AIS ladder)", *b[m], b["evals"], b["time"])
        c = run_crais(seed, args.particles, a["evals"])
        add("CR-AIS", *c["CR-AIS"], c["evals"], c["time"])
        print(
            f"seed {seed}: RTS exp {a['RTS'][0] - LOG_C:+.3f}±{a['RTS'][1]:.3f} "
            f"(rounds {a['rounds']}, max|Kĉ−1| {a['c_dev']:.2f}, mode share {a['mode_share']:.2f}) | "
            f"RTS CR-ladder {b['RTS'][0] - LOG_C:+.3f}±{b['RTS'][1]:.3f} (rounds {b['rounds']}) | "
            f"TI {a['TI'][0] - LOG_C:+.3f} RB-TI {a['RB-TI'][0] - LOG_C:+.3f} | "
            f"CR-AIS {c['CR-AIS'][0] - LOG_C:+.3f}±{c['CR-AIS'][1]:.3f} ({c['steps']} steps) | "
            f"evals {a['evals']:,} / {b['evals']:,} / {c['evals']:,}",
            flush=True,
        )
    print(f"\nexact log Z = {LOG_C}; {args.reps} replicates, N = {args.particles}, K = {args.temperatures}, "
          f"{args.sweeps} final sweeps, HMC (3 leapfrog steps)")
    print(f"{'method':<28} {'mean err':>9} {'RMSE':>7} {'mean SE':>8} {'evals':>11} {'time/s':>7}")
    for name, vals in rows.items():
        v = np.array(vals)
        print(f"{name:<28} {v[:, 0].mean():+9.4f} {np.sqrt(np.mean(v[:, 0] ** 2)):7.4f} {v[:, 1].mean():8.4f} "
              f"{v[:, 2].mean():11,.0f} {v[:, 3].mean():7.1f}")


if __name__ == "__main__":
    main()
