"""Tables 1 and 2 of Doucet et al. (2022), "Annealed importance sampling meets score
matching": ULA, UHA and Monte Carlo Diffusion (MCD) on normalized targets (log Z = 0).

    python benchmarks/bench_mcd.py --table 1 [--dims 20 200 500] [--steps 64 128 256]
        [--methods ula mcd] [--iters 1000] [--batch 64] [--n-eval 8192] [--seeds 1]
        [--hidden 64] [--blocks 2] [--jsonl PATH]
    python benchmarks/bench_mcd.py --table 2 ...          # the Gaussian mixture
    python benchmarks/bench_mcd.py --from PATH             # re-print saved rows
    python benchmarks/bench_mcd.py --pymc 5 [--methods mcd uha ula]
        # pmc.sample_mcd with its defaults on pymc_crais.validation.testing.linear_regression(d=5)

Results and the commands behind them: benchmarks/reports/benchmarks.md, "Learned backward kernels (MCD)".

* Table 1: ``q0 = N(3·1, I)`` fixed, target ``N(0, I)``, linear schedule fixed; only the
  per-step step sizes are learned (ULA and MCD alike, as in the paper), MCD also learns its
  network. ``ε_k ≤ 0.25`` as the paper's scaled sigmoid.
* Table 2: an equal-weight mixture of 8 ``N(m_j, I)`` with ``m_j ~ N(0, 3 I)`` drawn once per
  dimension from ``default_rng(MIXTURE_SEED + d)``; everything is learned ("full
  differentiability"): the initial Gaussian's mean and scale (start ``N(0, I)``), the
  schedule, the step sizes, and for UHA the momentum persistence η.

Every run: Adam for ``--iters`` iterations on batches of ``--batch`` trajectories (rates
decaying to 10 %), then ``log Ẑ`` from ``--n-eval`` fresh trajectories; the ± of a row is the
standard error over seeds when ``--seeds`` ≥ 2, else the run's own delta-method MCSE. BLAS
runs single-threaded (the network's products are small). Rows are appended to ``--jsonl`` as
they finish.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from pymc_crais.core.learned.mcd import ResidualScore, estimate, train
from pymc_crais.core.learned.ula import FunctionTarget, init_params, log_z_estimate

MIXTURE_SEED = 2022
PAPER = {
    1: {
        "ula": {
            20: (-0.83, -0.086, -0.059),
            200: (-42.84, -17.10, -5.95),
            500: (-142.40, -59.30, -24.57),
        },
        "mcd": {
            20: (-0.0013, 0.0019, -0.0002),
            200: (-0.087, -0.018, -0.020),
            500: (-0.58, -0.045, -0.040),
        },
        "steps": (64, 128, 256),
    },
    2: {
        "ula": {20: (-0.68, -0.018), 200: (-1.14, -1.70), 500: (-2.97, -2.97)},
        "uha": {20: (-0.50, -0.31), 200: (-1.07, -0.41), 500: (-2.98, -2.97)},
        "mcd": {20: (0.0009, 0.015), 200: (-0.13, 0.040), 500: (-1.50, -0.29)},
        "steps": (128, 256),
    },
}


def gaussian_target(d: int) -> FunctionTarget:
    """``N(0, I_d)``, normalized."""
    c = -0.5 * d * np.log(2 * np.pi)
    return FunctionTarget(
        d,
        log_density=lambda x: c - 0.5 * np.sum(x * x, axis=1),
        grad_log_density=lambda x: -x,
        hvp_fn=lambda x, v: -v,
    )


def mixture_target(d: int, n_comp: int = 8) -> FunctionTarget:
    """Equal-weight mixture of ``N(m_j, I)``, ``m_j ~ N(0, 3I)``; normalized, analytic HVP."""
    means = np.random.default_rng(MIXTURE_SEED + d).normal(0.0, np.sqrt(3.0), (n_comp, d))
    c = -0.5 * d * np.log(2 * np.pi) - np.log(n_comp)

    def parts(x):
        diff = means[None, :, :] - x[:, None, :]  # (N, J, d)
        lj = -0.5 * np.sum(diff * diff, axis=2)
        m = lj.max(axis=1, keepdims=True)
        e = np.exp(lj - m)
        s = e.sum(axis=1, keepdims=True)
        return diff, (m + np.log(s))[:, 0] + c, e / s

    def logp(x):
        return parts(x)[1]

    def grad(x):
        diff, _, r = parts(x)
        return np.einsum("nj,njd->nd", r, diff)

    def hvp(x, v):
        diff, _, r = parts(x)
        g = np.einsum("nj,njd->nd", r, diff)
        dv = np.einsum("njd,nd->nj", diff, v)
        return -v + np.einsum("nj,njd->nd", r * dv, diff) - g * np.sum(g * v, axis=1, keepdims=True)

    return FunctionTarget(d, log_density=logp, grad_log_density=grad, hvp_fn=hvp)


def run_one(table, method, d, K, seed, args):
    rng = np.random.default_rng([table, d, K, seed])
    if table == 1:
        target = gaussian_target(d)
        params = init_params(d, K, step_size=0.05, max_step=0.25, mean=3.0)
        learn = ("step_logit",)
    else:
        target = mixture_target(d)
        params = init_params(d, K, step_size=0.05, max_step=0.25)
        learn = ("step_logit", "schedule_logit", "mu", "log_sigma")
        if method == "uha":
            learn = (*learn, "eta_logit")
    score = (
        ResidualScore(d, K, hidden=args.hidden, n_blocks=args.blocks) if method == "mcd" else None
    )
    t0 = time.perf_counter()
    res = train(
        target,
        params,
        rng,
        method=method,
        train_steps=args.iters,
        batch=args.batch,
        learn=learn,
        lr=args.lr,
        net_lr=args.net_lr,
        score=score,
    )
    t1 = time.perf_counter()
    lw = estimate(target, res, rng, args.n_eval, method=method, score=score)
    log_z, mcse = log_z_estimate(lw)
    return {
        "table": table,
        "method": method,
        "d": d,
        "K": K,
        "seed": seed,
        "log_z": log_z,
        "mcse": mcse,
        "elbo_last": float(np.mean(res.elbo[-max(1, args.iters // 20) :])),
        "eval_mean_log_w": float(np.mean(lw[np.isfinite(lw)])),
        "iters": args.iters,
        "batch": args.batch,
        "n_eval": args.n_eval,
        "hidden": args.hidden,
        "blocks": args.blocks,
        "lr": args.lr,
        "net_lr": args.net_lr,
        "train_s_contended": t1 - t0,
        "eval_s_contended": time.perf_counter() - t1,
    }


def run_pymc(d, methods):
    """``pmc.sample_mcd`` with its defaults (seed 1) on the exact conjugate regression."""
    import pymc_crais as pmc
    from pymc_crais.validation.testing import linear_regression

    m = linear_regression(d=d)
    for method in methods:
        idata = pmc.sample_mcd(method=method, model=m.model, random_seed=1, progressbar=False)
        value, mcse = pmc.log_marginal_likelihood(idata)
        ss = idata.sample_stats
        print(
            f"{method}: d={d} exact {m.log_z:.4f} estimate {value:.4f} ± {mcse:.4f} "
            f"error {value - m.log_z:+.4f}; n_logp_evals per chain {ss.n_logp_evals.values.tolist()}",
            flush=True,
        )


def print_rows(rows):
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["table"], r["method"], r["d"], r["K"]), []).append(r)
    print("| table | method | d | K | ours log Ẑ | ± | seeds | iters × batch | paper |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (t, m, d, K), rs in sorted(groups.items()):
        z = np.array([r["log_z"] for r in rs])
        pm = z.std(ddof=1) / np.sqrt(z.size) if z.size > 1 else rs[0]["mcse"]
        ref = PAPER[t].get(m, {}).get(d)
        paper = ref[PAPER[t]["steps"].index(K)] if ref and K in PAPER[t]["steps"] else "—"
        print(
            f"| {t} | {m.upper()} | {d} | {K} | {z.mean():.4f} | {pm:.4f} | {z.size} | "
            f"{rs[0]['iters']} × {rs[0]['batch']} | {paper} |"
        )


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--table", type=int, choices=(1, 2), default=1)
    ap.add_argument("--dims", type=int, nargs="+", default=[20, 200, 500])
    ap.add_argument("--steps", type=int, nargs="+", default=None)
    ap.add_argument("--methods", nargs="+", default=None)
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--n-eval", type=int, default=8192)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--blocks", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--net-lr", type=float, default=0.005)
    ap.add_argument("--jsonl", default=None)
    ap.add_argument("--from", dest="from_path", default=None)
    ap.add_argument("--pymc", type=int, default=None, help="d of the exact regression")
    args = ap.parse_args()
    if args.pymc:
        run_pymc(args.pymc, args.methods or ["mcd", "uha", "ula"])
        return
    if args.from_path:
        print_rows(
            [json.loads(line) for line in Path(args.from_path).read_text().splitlines() if line]
        )
        return
    steps = args.steps or list(PAPER[args.table]["steps"])
    methods = args.methods or (["ula", "mcd"] if args.table == 1 else ["ula", "uha", "mcd"])
    rows = []
    with threadpool_limits(limits=1):
        for d in args.dims:
            for K in steps:
                for method in methods:
                    for seed in range(args.seeds):
                        row = run_one(args.table, method, d, K, seed, args)
                        rows.append(row)
                        print(json.dumps(row), flush=True)
                        if args.jsonl:
                            with open(args.jsonl, "a") as fh:
                                fh.write(json.dumps(row) + "\n")
    print_rows(rows)


if __name__ == "__main__":
    main()
