"""Batched logp+grad of a Pima-sized logistic regression, three ways, in one run.

    python benchmarks/bench_logp.py [--n 2000] [--repeats 20]

(a) pymc_crais' batched function (one compiled PyTensor call for all particles, via
    vectorize_graph), through ``ModelDensity.evaluate`` (with its output sanitizing) and
    as the raw compiled call;
(b) the per-particle loop: the same model compiled for one particle, called N times
    (what pm.sample_smc does);
(c) hand-written batched NumPy logp + gradient.
Prints milliseconds per batch and the ratios. No assertion: numbers go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np


def numpy_logp_grad(B, X, y, prior_sd):
    """Hand-written batched prior/likelihood log-densities and gradients."""
    eta = B @ X.T
    ll = (y * eta - np.logaddexp(0.0, eta)).sum(axis=1)
    g_ll = (y - 1.0 / (1.0 + np.exp(-eta))) @ X
    d = B.shape[1]
    lp = -0.5 * (B * B).sum(axis=1) / prior_sd**2 - d * np.log(prior_sd) - 0.5 * d * np.log(2 * np.pi)
    return lp, ll, -B / prior_sd**2, g_ll


def best_of(fn, repeats):
    fn()  # warm-up (JIT, caches)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1e3 * float(np.median(times)), 1e3 * float(np.min(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="particles per batch")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--loop-repeats", type=int, default=3)
    args = parser.parse_args()

    from pymc_crais.datasets import load_pima
    from pymc_crais.models import logistic_regression
    from pymc_crais.pymc.compile import compile_model_density

    data = load_pima()
    model = logistic_regression(data.X, data.y, prior_sd=5.0)
    rng = np.random.default_rng(0)
    B = rng.normal(0.0, 1.0, size=(args.n, data.X.shape[1]))
    yf = data.y.astype(np.float64)

    t = time.perf_counter()
    batched = compile_model_density(model)
    t_compile = time.perf_counter() - t
    looped = compile_model_density(model, vectorize=False)

    ev = batched.evaluate(B, gradient=True)
    ref = numpy_logp_grad(B, data.X, yf, 5.0)
    err = max(
        np.abs(a - b).max()
        for a, b in zip((ev.log_q0, ev.delta, ev.grad_log_q0, ev.grad_delta), ref)
    )

    rows = {
        "batched (ModelDensity.evaluate)": best_of(lambda: batched.evaluate(B, gradient=True), args.repeats),
        "batched (raw compiled call)": best_of(lambda: batched._fn_grad(B), args.repeats),
        "hand-written NumPy": best_of(lambda: numpy_logp_grad(B, data.X, yf, 5.0), args.repeats),
        "per-particle compiled loop": best_of(lambda: looped.evaluate(B, gradient=True), args.loop_repeats),
    }
    numpy_ms = rows["hand-written NumPy"][0]
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"N = {args.n} particles, data 768 x 8; PyTensor linker: {type(batched._fn_grad.maker.linker).__name__}")
    print(f"compile time (logp + grad functions): {t_compile:.2f} s; max |batched - NumPy| = {err:.2e}")
    print(f"{'method':<34} {'median ms':>10} {'best ms':>9} {'/ NumPy':>9}")
    for name, (med, best) in rows.items():
        print(f"{name:<34} {med:>10.2f} {best:>9.2f} {med / numpy_ms:>9.2f}")
    loop_ratio = rows["per-particle compiled loop"][0] / rows["batched (ModelDensity.evaluate)"][0]
    print(f"per-particle loop / batched: {loop_ratio:.1f}x")


if __name__ == "__main__":
    main()
