"""AIS schedules on the CR-AIS paper's synthetic high-dimensional targets (exact log Z = 0).

    python benchmarks/bench_synthetic.py [--d 128 512] [--seeds 5] [--n 4096] [--m 64]
        [--kernels paper ours] [--alphas 0] [--targets ...] [--methods ...]
        [--scale-shift pilot|exact] [--adaptive-max-step 0.125] [--quick] [--json PATH]
    python benchmarks/bench_synthetic.py --table-from PATH   # re-print a saved run's tables

Results and the commands behind them: benchmarks/reports/benchmarks.md, "Synthetic high-dimensional targets".

Goshtasbpour et al. (ICML 2023), Section 5.3, Table 2 and Appendix E (Tables 5-6): from
``q0 = N(0, I_d)`` to four normalized targets (``pymc_crais/validation/synthetic_targets.py``) with
about ``M = 64`` annealing steps, ``|log Ẑ − log Z|`` over seeds. Everything runs on the
NumPy core (``pymc_crais.core``), the way ``sample_crais`` drives it:

* ``linear`` / ``sigmoid`` / ``exponential``: fixed schedules of M steps (sigmoid scale 10,
  exponential ``tau_min = 1e-4``: the core's defaults);
* ``ess 0.6`` / ``cess 0.6``: adaptive AIS (ESS ratio / conditional ESS = 0.6 N), steps
  capped at ``max_step = 1/8`` (``--adaptive-max-step``; any other value is shown in the
  row's label); their length is whatever the rule gives;
* ``cess 0.6*``: the cess run's schedule interpolated to exactly M steps, then a fresh run
  on it (kernel parameters replayed from the cess run by τ);
* ``cr-ais``: constant-rate schedule, δ searched so that the tuning run has M ± 12.5 %
  steps (start: ``δ = T/M`` from a 256-particle geometric pilot on a 32-step exponential
  schedule, ``T = log Ẑ_pilot − mean Δ(q0 draws)``; then ``δ ← δ · m/M``, at most 4 tries,
  the closest kept), then a fresh final run on the tuned schedule as it is;
* ``cr-ais*``: the same with a tuning run of about M/2 steps, interpolated to exactly M.

Kernel settings: ``paper`` is one HMC transition of one leapfrog step, step size 0.5,
identity mass, never adapted (fixed ``kernel_params``); ``ours`` is the core's default HMC
(3 leapfrog steps, step size adapted towards 0.7 acceptance, diagonal mass from the particle
variances, leave-one-out), population-tuned in the fixed and adaptive runs and replayed from
the tuning run in the CR-AIS / cess* final runs.

Reported per method: mean ± sd over seeds of ``|log Ẑ|``, the mean number of steps M of the
run that gives the estimate, and the mean total particle-evaluations divided by N
(pilot, δ search, tuning and final run included; one evaluation = log-density + gradient of
one particle). For α ≠ 0 (``--alphas``) the path is the power-mean path with scale shift
``c`` = the pilot's ``log Ẑ`` (``--scale-shift exact``: the exact ``log Z``, to see what a
perfect pilot would give); the "best α" rows take, per target, the α with the smallest
mean error (as the paper's cross-validation over α does). Prints Markdown; writes nothing
unless ``--json PATH``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # single-threaded BLAS: the machine is shared

import argparse
import json
import platform
import time
import warnings

import numpy as np

from pymc_crais.core import HMC, anneal, make_fixed_schedule, make_path
from pymc_crais.core.anneal import ParamsByTau
from pymc_crais.core.kernels import HMCParams
from pymc_crais.core.schedules import FixedSchedule, exponential_schedule, interpolate_schedule
from pymc_crais.core.schedules.adaptive import CESSSchedule, ConstantRateSchedule, ESSSchedule
from pymc_crais.core.schedules.rate_reference import RateReference, reference_rate_for_steps
from pymc_crais.validation.synthetic_targets import (
    EXTRA_TARGETS,
    TARGETS,
    make_density,
    make_target,
)

MAX_STEP = 0.125
PILOT_N = 256

# Paper (Goshtasbpour et al., ICML 2023): Table 2 "Est. err." and "Comput." and, for the
# non-interpolated adaptive rows, M from Tables 5 (d = 128) and 6 (d = 512). Best over α.
# (err mean, err sd, M, comput) per target, targets in TARGETS order.
PAPER = {
    128: {
        "Lin.": [(991.90, 69.87, 64, 64.0), (230.65, 6.16, 64, 64.0), (0.36, 0.22, 64, 64.0), (1.37, 0.19, 64, 64.0)],
        "Sigm.": [(907.57, 24.04, 64, 64.0), (270.55, 6.42, 64, 64.0), (0.07, 1.14, 64, 64.0), (1.46, 0.14, 64, 64.0)],
        "Exp.": [(780.58, 40.02, 64, 64.0), (507.43, 15.04, 64, 64.0), (1.21, 0.51, 64, 64.0), (2.04, 0.31, 64, 64.0)],
        "Ada. 0.6C": [(853.39, 36.87, 61.8, 424.1), (268.89, 21.24, 61.4, 316.6), (0.45, 0.75, 39.6, 297.5), (1.37, 0.24, 43.2, 296.6)],
        "Ada. 0.6C*": [(856.33, 29.96, 64, 125.8), (250.06, 6.14, 64, 99.6), (0.37, 0.90, 64, 73.4), (1.66, 0.15, 64, 73.8)],
        "CR-AIS": [(788.67, 36.25, 39.0, 78.0), (308.82, 6.81, 56.0, 112.0), (0.68, 0.31, 58.6, 117.2), (0.69, 0.27, 49.2, 98.4)],
        "CR-AIS*": [(807.77, 4.36, 64, 88.2), (228.54, 0.00, 64, 72.0), (0.01, 0.00, 64, 72.0), (1.53, 0.00, 64, 73.0)],
    },
    512: {
        "Lin.": [(5279.55, 79.56, 64, 64.0), (1087.38, 22.68, 64, 64.0), (9.03, 0.77, 64, 64.0), (8.16, 0.45, 64, 64.0)],
        "Sigm.": [(4757.13, 59.34, 64, 64.0), (1022.60, 23.55, 64, 64.0), (6.95, 2.48, 64, 64.0), (8.71, 1.24, 64, 64.0)],
        "Exp.": [(4435.05, 110.36, 64, 64.0), (1683.21, 13.73, 64, 64.0), (13.17, 0.40, 64, 64.0), (13.98, 1.08, 64, 64.0)],
        "Ada. 0.6C": [(5181.95, 232.09, 53.4, 503.8), (1147.02, 142.66, 66.4, 367.2), (9.12, 3.01, 66.4, 413.8), (9.72, 2.41, 37.2, 247.7)],
        "Ada. 0.6C*": [(4423.42, 204.04, 64, 117.4), (1272.70, 158.61, 64, 85.2), (8.27, 1.33, 64, 94.8), (9.30, 0.56, 64, 81.6)],
        "CR-AIS": [(4413.95, 95.75, 64.8, 129.6), (1200.12, 27.12, 70.0, 140.0), (8.75, 1.84, 55.4, 110.8), (8.40, 1.28, 49.2, 98.4)],
        "CR-AIS*": [(4546.65, 57.80, 64, 128.8), (1069.32, 1.96, 64, 75.0), (7.93, 0.74, 64, 78.6), (8.98, 0.00, 64, 73.0)],
    },
}

FIXED = ("linear", "sigmoid", "exponential")


class KernelSetting:
    """A kernel and, for the ``paper`` setting, its fixed parameters."""

    def __init__(self, name: str, d: int):
        self.name = name
        if name == "paper":
            self.fixed = HMCParams(0.5, np.ones(d))
        elif name == "ours":
            self.fixed = None
        else:
            raise ValueError(f"unknown kernel setting {name!r}")

    def kernel(self) -> HMC:
        return HMC(n_leapfrog=1, step_size=0.5) if self.name == "paper" else HMC()

    def params(self, replay=None):
        """``kernel_params`` for :func:`anneal`: fixed (paper), a replay, or None (tuned)."""
        if self.fixed is not None:
            fixed = self.fixed
            return lambda tau: fixed
        return replay


def _run(rng, density, n, path, schedule, ks: KernelSetting, replay=None, max_steps=100_000):
    x0 = density.sample_q0(rng, n)
    return anneal(rng, density, x0, path, schedule, ks.kernel(), kernel_params=ks.params(replay),
                  max_steps=max_steps)


def _replay(res) -> ParamsByTau:
    return ParamsByTau(res.stages["tau"], res.kernel_params)


def pilot(rng, density, ks: KernelSetting):
    """Geometric AIS with 256 particles on a 32-step exponential schedule (as sample_crais):
    ``log Ẑ_pilot`` (the power-mean scale shift), ``T = log Ẑ_pilot − mean Δ(q0)`` and its
    stages pooled (the constant-rate rule's reference for α ≠ 0, as sample_crais)."""
    x0 = density.sample_q0(rng, PILOT_N)
    mean_delta0 = float(np.mean(density.evaluate(x0).delta))
    stages = []

    class Recording(FixedSchedule):
        def next_tau(self, stage, tau, state, log_weights, path):
            stages.append((tau, state.delta.copy(), np.array(log_weights, dtype=float)))
            return super().next_tau(stage, tau, state, log_weights, path)

    res = anneal(rng, density, x0, make_path(0.0), Recording(exponential_schedule(32, tau_min=1e-6)),
                 ks.kernel(), kernel_params=ks.params())
    stages.append((1.0, res.state.delta, res.log_weights))
    ref = RateReference.from_geometric_stages(*zip(*stages, strict=True))
    log_z = res.log_marginal_likelihood
    return log_z, max(log_z - mean_delta0, 1e-12), ref


def tune_constant_rate(rng, density, n, path, ks, target_steps, total, reference=None):
    """Search δ so that the constant-rate tuning run has ``target_steps`` steps (± 12.5 %);
    with a ``reference`` (α ≠ 0) the rule's statistics come from it."""
    if reference is not None:  # the rule's schedule on the reference is known: bisection
        delta = reference_rate_for_steps(reference, path, target_steps, tol=0.02, max_dtau=MAX_STEP)
    else:
        delta = total / target_steps
    best = None
    for _ in range(4):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="max_steps=", category=RuntimeWarning)
            res = _run(rng, density, n, path, ConstantRateSchedule(delta, max_step=MAX_STEP, reference=reference),
                       ks, max_steps=4 * target_steps)
        m = res.n_stages
        if best is None or (not res.hit_max_steps and abs(m - target_steps) < abs(best[1].n_stages - target_steps)):
            best = (delta, res)
        if abs(m - target_steps) <= target_steps / 8 and not res.hit_max_steps:
            break
        clipped = np.mean(np.diff(np.concatenate([[0.0], res.stages["tau"]])) >= MAX_STEP * (1 - 1e-9))
        if m < target_steps and clipped > 0.5:
            break  # too short only because max_step clips most steps
        delta *= 4.0 if res.hit_max_steps else m / target_steps
    return best


def run_methods(target, ks: KernelSetting, n, m, seed, alphas, methods, adaptive_max_step=MAX_STEP,
                scale_shift="pilot", rate_statistics="reference"):
    """All methods on one target, kernel setting and seed; dict method -> record.

    ``scale_shift``: the power-mean paths' ``c``, the pilot's ``log Ẑ`` (``"pilot"``, as
    ``sample_crais``) or the exact ``log Z`` (``"exact"``: a diagnostic, not a method)."""
    density = make_density(target)
    out = {}
    cap = "" if adaptive_max_step == MAX_STEP else f" (max step 1/{1 / adaptive_max_step:g})"

    def record(key, res, evals_before, t0, extra=None):
        out[key] = {
            "log_z": res.log_marginal_likelihood,
            "error": abs(res.log_marginal_likelihood - target.log_z),
            "M": res.n_stages,
            "evals_per_n": (density.n_evals - evals_before) / n,
            "seconds": time.perf_counter() - t0,
            **(extra or {}),
        }

    def rng_for(i):
        return np.random.default_rng([seed, target.dim, i, 0 if ks.name == "paper" else 1])

    geo = make_path(0.0)
    for i, name in enumerate(FIXED):
        if name in methods:
            t0, e0 = time.perf_counter(), density.n_evals
            record(name, _run(rng_for(i), density, n, geo, make_fixed_schedule(name, m), ks), e0, t0)
    if "ess" in methods:
        t0, e0 = time.perf_counter(), density.n_evals
        record("ess 0.6" + cap, _run(rng_for(10), density, n, geo, ESSSchedule(0.6, max_step=adaptive_max_step), ks),
               e0, t0)
    if "cess" in methods:
        t0, e0 = time.perf_counter(), density.n_evals
        rng = rng_for(11)
        tres = _run(rng, density, n, geo, CESSSchedule(0.6, max_step=adaptive_max_step), ks)
        record("cess 0.6" + cap, tres, e0, t0)
        final = interpolate_schedule(np.concatenate([[0.0], tres.stages["tau"]]), m)
        res = _run(rng, density, n, geo, FixedSchedule(final, name="cess*"), ks, replay=_replay(tres))
        record("cess 0.6*" + cap, res, e0, t0)
    if "crais" in methods or "crais*" in methods:
        t0, e0 = time.perf_counter(), density.n_evals
        prng = rng_for(20)
        pilot_log_z, total, reference = pilot(prng, density, ks)
        pilot_evals, pilot_t = density.n_evals - e0, time.perf_counter() - t0
        for j, alpha in enumerate(alphas):
            c = target.log_z if scale_shift == "exact" else pilot_log_z
            path = make_path(alpha, 0.0 if alpha == 0.0 else c)
            for k, (key, steps, interp) in enumerate((("crais", m, False), ("crais*", max(m // 2, 2), True))):
                if key not in methods:
                    continue
                t1, e1 = time.perf_counter() - pilot_t, density.n_evals - pilot_evals
                rng = rng_for(100 + 10 * j + k)
                ref = reference if (alpha != 0.0 and rate_statistics == "reference") else None
                delta, tres = tune_constant_rate(rng, density, n, path, ks, steps, total, ref)
                tuned = np.concatenate([[0.0], tres.stages["tau"]])
                final = interpolate_schedule(tuned, m) if interp else tuned
                res = _run(rng, density, n, path, FixedSchedule(final, name=key), ks, replay=_replay(tres))
                label = ("cr-ais*" if interp else "cr-ais") + f" α={alpha:g}"
                record(label, res, e1, t1, {"alpha": alpha, "delta": delta, "M_tune": tres.n_stages,
                                            "c": 0.0 if alpha == 0.0 else c, "pilot_log_z": pilot_log_z})
    return out


def _steps(rec: dict, key: str) -> float:
    """Annealing steps of the tuning run plus the final run (the paper's "Comput." unit):
    ``M_tune + M`` for CR-AIS (the δ-search attempts before it not counted), the cess run's
    ``M`` plus ``M`` for cess*, and ``M`` otherwise."""
    r = rec[key]
    if "M_tune" in r:
        return r["M_tune"] + r["M"]
    if key.startswith("cess 0.6*"):
        return rec["cess 0.6" + key[len("cess 0.6*"):]]["M"] + r["M"]
    return r["M"]


def summarize(per_seed: list) -> dict:
    """Per method: mean ± sd of the error, mean M, steps and evaluations per particle."""
    out = {}
    for key in per_seed[0]:
        err = np.array([rec[key]["error"] for rec in per_seed])
        out[key] = {
            "err_mean": float(err.mean()),
            "err_sd": float(err.std(ddof=1)) if err.size > 1 else float("nan"),
            "M": float(np.mean([rec[key]["M"] for rec in per_seed])),
            "steps": float(np.mean([_steps(rec, key) for rec in per_seed])),
            "evals_per_n": float(np.mean([rec[key]["evals_per_n"] for rec in per_seed])),
            "seconds": float(np.mean([rec[key]["seconds"] for rec in per_seed])),
        }
    return out


def _fmt_err(mean, sd):
    def f(v):
        if not np.isfinite(v):
            return "–"
        return f"{v:.2f}" if abs(v) < 1000 else f"{v:.1f}"
    return f"{f(mean)} ± {f(sd)}"


def table(d, kernels, targets, summaries, alphas):
    """Markdown table for one dimension: our rows per kernel setting, then the paper's rows."""
    head = "| method | kernel | " + " | ".join(f"{t} err | M | steps | evals/N" for t in targets) + " |"
    lines = [head, "|" + "---|" * (2 + 4 * len(targets))]

    def cell(v, note=""):
        return (f"{_fmt_err(v['err_mean'], v['err_sd'])}{note} | {v['M']:.1f} | {v['steps']:.1f} | "
                f"{v['evals_per_n']:.1f}")

    for ks in kernels:
        s = summaries[ks]
        keys = [k for k in s[targets[0]] if not k.startswith("cr-ais")]
        keys += [k for k in s[targets[0]] if k.startswith("cr-ais")]
        for key in keys:
            cells = []
            for t in targets:
                v = s[t][key]
                cells.append(cell(v))
            lines.append(f"| {key} | {ks} | " + " | ".join(cells) + " |")
        if len(alphas) > 1:
            for star in ("", "*"):
                cells = []
                for t in targets:
                    cands = {k: v for k, v in s[t].items() if k.startswith(f"cr-ais{star} α=")}
                    if not cands:
                        cells.append("| | |")
                        continue
                    k_best = min(cands, key=lambda k: cands[k]["err_mean"])
                    cells.append(cell(cands[k_best], f" (α={k_best.split('=')[1]})"))
                lines.append(f"| cr-ais{star} best α | {ks} | " + " | ".join(cells) + " |")
    if d in PAPER and any(t in TARGETS for t in targets):
        idx = [list(TARGETS).index(t) if t in TARGETS else None for t in targets]
        for key, vals in PAPER[d].items():
            cells = [f"{_fmt_err(vals[i][0], vals[i][1])} | {vals[i][2]:g} | {vals[i][3]:g} | " if i is not None
                     else "– | | | " for i in idx]
            lines.append(f"| paper {key} | paper | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def print_table(d, kernels, targets, alphas, records):
    """Summarize the per-seed ``records`` (keys ``"d/kernel/target"``) and print d's table."""
    summaries = {ks: {t: summarize(records[f"{d}/{ks}/{t}"]) for t in targets} for ks in kernels}
    print(f"\n### d = {d}\n")
    print(table(d, kernels, targets, summaries, alphas))
    print(flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..SEEDS-1")
    parser.add_argument("--n", type=int, default=4096, help="particles")
    parser.add_argument("--m", type=int, default=64, help="annealing steps M")
    parser.add_argument("--kernels", nargs="+", default=["paper", "ours"], choices=["paper", "ours"])
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.0], help="CR-AIS alpha grid")
    parser.add_argument("--targets", nargs="+", default=list(TARGETS), choices=[*TARGETS, *EXTRA_TARGETS])
    parser.add_argument("--methods", nargs="+", default=[*FIXED, "ess", "cess", "crais", "crais*"])
    parser.add_argument("--scale-shift", default="pilot", choices=["pilot", "exact"],
                        help="c of the α ≠ 0 paths: the pilot's log Z (as sample_crais) or the exact one")
    parser.add_argument("--rate-statistics", default="reference", choices=["reference", "particles"],
                        help="α ≠ 0: the constant-rate statistics from the pooled pilot (as sample_crais) "
                             "or from the annealed particles (before issue 15)")
    parser.add_argument("--adaptive-max-step", type=float, default=MAX_STEP, help="max Δτ of the ess/cess rules")
    parser.add_argument("--quick", action="store_true", help="d=16, N=256, M=16, 2 seeds (smoke test)")
    parser.add_argument("--json", default=None, help="also write all per-seed records here")
    parser.add_argument("--table-from", default=None, metavar="PATH",
                        help="print the tables of a saved --json file and exit (no run)")
    args = parser.parse_args(argv)
    if args.table_from:
        with open(args.table_from) as fh:
            saved = json.load(fh)
        a, recs = saved["args"], saved["records"]
        print(f"# tables of {args.table_from}: N={a['n']}, M={a['m']}, seeds={a['seeds']}, "
              f"wall {saved['wall_s']:.0f} s")
        for d in a["d"]:
            print_table(d, a["kernels"], a["targets"], a["alphas"], recs)
        return
    if args.quick:
        args.d, args.n, args.m, args.seeds = [16], 256, 16, 2

    t_start = time.perf_counter()
    print(f"# bench_synthetic: N={args.n}, M={args.m}, seeds={args.seeds}, kernels={args.kernels}, "
          f"alphas={args.alphas}, scale shift {args.scale_shift}, rate statistics {args.rate_statistics}; {platform.machine()}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.2f}", flush=True)
    all_records = {}
    for d in args.d:
        for ks_name in args.kernels:
            for tname in args.targets:
                target = make_target(tname, d)
                ks = KernelSetting(ks_name, d)
                for seed in range(args.seeds):
                    rec = run_methods(target, ks, args.n, args.m, seed, args.alphas, set(args.methods),
                                      args.adaptive_max_step, args.scale_shift, args.rate_statistics)
                    all_records.setdefault(f"{d}/{ks_name}/{tname}", []).append(rec)
                    print(f"  d={d} {ks_name} {tname} seed {seed}: " + ", ".join(
                        f"{k} {v['error']:.3g} (M {v['M']})" for k, v in rec.items())
                        + f"  [{time.perf_counter() - t_start:.0f} s, load {os.getloadavg()[0]:.2f}]",
                        flush=True)
        print_table(d, args.kernels, args.targets, args.alphas, all_records)
    wall = time.perf_counter() - t_start
    print(f"\nwall {wall:.0f} s, load {os.getloadavg()[0]:.2f} (1-min average at the end)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "wall_s": wall, "records": all_records}, fh, indent=1)


if __name__ == "__main__":
    main()
