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


def interleaved_times(fns: dict, repeats: int, slow: set) -> dict:
    """Median and best ms per method, timing the methods round-robin so that machine
    drift affects all of them alike. Methods in ``slow`` are timed every 5th round."""
    for fn in fns.values():
        fn()  # warm-up (JIT, caches)
    times = {name: [] for name in fns}
    for r in range(repeats):
        for name, fn in fns.items():
            if name in slow and r % 5:
                continue
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return {k: (1e3 * float(np.median(v)), 1e3 * float(np.min(v))) for k, v in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="particles per batch")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--rows", type=int, default=None, help="use only the first ROWS rows of Pima")
    parser.add_argument("--backend", default=None, help="PyTensor backend: c, numba, jax (default: PyTensor's)")
    args = parser.parse_args()

    from pymc_crais.datasets import load_pima
    from pymc_crais.models import logistic_regression
    from pymc_crais.pymc.compile import compile_model_density, resolve_compile_kwargs

    data = load_pima()
    if args.rows is not None:
        data = type(data)(data.X[: args.rows], data.y[: args.rows], data.feature_names, data.name)
    model = logistic_regression(data.X, data.y, prior_sd=5.0)
    rng = np.random.default_rng(0)
    B = rng.normal(0.0, 1.0, size=(args.n, data.X.shape[1]))
    yf = data.y.astype(np.float64)

    t = time.perf_counter()
    ckw = resolve_compile_kwargs(args.backend, None)
    batched = compile_model_density(model, compile_kwargs=ckw)
    t_compile = time.perf_counter() - t
    looped = compile_model_density(model, vectorize=False, compile_kwargs=ckw)

    ev = batched.evaluate(B, gradient=True)
    ref = numpy_logp_grad(B, data.X, yf, 5.0)
    err = max(
        np.abs(a - b).max()
        for a, b in zip((ev.log_q0, ev.delta, ev.grad_log_q0, ev.grad_delta), ref)
    )

    rows = interleaved_times(
        {
            "batched (ModelDensity.evaluate)": lambda: batched.evaluate(B, gradient=True),
            "batched (raw compiled call)": lambda: batched._fn_grad(B),
            "hand-written NumPy": lambda: numpy_logp_grad(B, data.X, yf, 5.0),
            "per-particle compiled loop": lambda: looped.evaluate(B, gradient=True),
        },
        args.repeats,
        slow={"per-particle compiled loop"},
    )
    numpy_ms = rows["hand-written NumPy"][0]
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"N = {args.n} particles, data {data.X.shape[0]} x {data.X.shape[1]}; PyTensor linker: {type(batched._fn_grad.maker.linker).__name__}")
    print(f"compile time (logp + grad functions): {t_compile:.2f} s; max |batched - NumPy| = {err:.2e}")
    print(f"{'method':<34} {'median ms':>10} {'best ms':>9} {'/ NumPy':>9}")
    for name, (med, best) in rows.items():
        print(f"{name:<34} {med:>10.2f} {best:>9.2f} {med / numpy_ms:>9.2f}")
    loop_ratio = rows["per-particle compiled loop"][0] / rows["batched (ModelDensity.evaluate)"][0]
    print(f"per-particle loop / batched: {loop_ratio:.1f}x")


if __name__ == "__main__":
    main()
