"""Batched logp+grad of a Pima-sized logistic regression, several ways, in one run.

    python benchmarks/bench_logp.py [--n 2000] [--repeats 30] [--rows R] [--backend B[,B2,...]] [--threads 1]

(a) pymc_crais' batched function (one compiled PyTensor call for all particles, via
    vectorize_graph), through ``ModelDensity.evaluate`` (with its output sanitizing) and
    as the raw compiled call;
(b) the per-particle loop: the same model compiled for one particle, called N times
    (what pm.sample_smc does);
(c) hand-written batched NumPy logp + gradient;
(d) the engine floor: a fused single-pass Numba kernel (prior, Bernoulli-logit likelihood
    and both gradients; one pass over the data rows per block of particles; one core,
    ``parallel=False``, no fastmath).

``--backend`` takes one PyTensor backend (``c``, ``numba``, ``jax``; default PyTensor's) or a
comma-separated list: the first one gives the main table; with several, a second table
compares the linkers for the batched function (compile time in a fresh process, whether it
runs, its largest deviation from NumPy and its time per call, all timed round-robin).
BLAS (and XLA) run with one thread by default, as in the samplers. Wall and CPU times are
both reported: on a shared machine the CPU time of this process is the steadier measure. Prints milliseconds per batch and the ratios. No assertion: numbers go to benchmarks/reports/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
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


def make_fused_numba(block: int = 64, log1p: bool = True):
    """A fused Numba logp+grad for the logistic regression with a N(0, sd²) prior.

    Returns ``fused(B, X, y, prior_sd) -> (lp, ll, g_lp, g_ll)``. For each block of
    ``block`` particles the kernel walks the data rows once; per row and particle it needs
    one dot product, one ``exp`` and one ``log1p`` (``softplus(η) = max(η, 0) + log1p(e^{−|η|})``
    and the sigmoid from the same ``e^{−|η|}``), and accumulates ``ℓ`` and ``∇ℓ`` in local
    buffers. Single-threaded and without fastmath, so it is a floor for one core that
    agrees with NumPy to rounding. With ``log1p=False`` the softplus takes ``log(1 + e^{−|η|})``
    instead of ``log1p(e^{−|η|})`` (absolute error below 2.3e-16, cheaper: the form
    ``pymc_crais.samplers.engine.rewrites.local_softplus_to_log_exp`` compiles to).
    """
    import numba

    @numba.njit(cache=True, parallel=False, fastmath=False)
    def _kernel(B, X, y, inv_var, log_norm, lp, ll, g_lp, g_ll, block, use_log1p):
        n, d = B.shape
        m = X.shape[0]
        # the block's particles and gradients transposed, (d, block): the loops over the
        # block's particles are contiguous (SIMD for the dot products and the gradient)
        bt = np.empty((d, block))
        gt = np.empty((d, block))
        lb = np.empty(block)
        eta = np.empty(block)
        resid = np.empty(block)
        for start in range(0, n, block):
            nb = min(block, n - start)
            for k in range(nb):
                i = start + k
                s = 0.0
                for j in range(d):
                    b = B[i, j]
                    bt[j, k] = b
                    gt[j, k] = 0.0
                    s += b * b
                    g_lp[i, j] = -b * inv_var
                lp[i] = -0.5 * s * inv_var + log_norm
                lb[k] = 0.0
            for r in range(m):  # the one pass over the data for this block
                yr = y[r]
                for k in range(nb):
                    eta[k] = 0.0
                for j in range(d):
                    xrj = X[r, j]
                    for k in range(nb):
                        eta[k] += xrj * bt[j, k]
                for k in range(nb):
                    e = eta[k]
                    a = math.exp(-abs(e))
                    sp = math.log1p(a) if use_log1p else math.log(1.0 + a)
                    lb[k] += yr * e - (max(e, 0.0) + sp)  # y·η − softplus(η)
                    resid[k] = yr - (1.0 / (1.0 + a) if e >= 0.0 else a / (1.0 + a))  # y − sigmoid(η)
                for j in range(d):
                    xrj = X[r, j]
                    for k in range(nb):
                        gt[j, k] += resid[k] * xrj
            for k in range(nb):
                i = start + k
                ll[i] = lb[k]
                for j in range(d):
                    g_ll[i, j] = gt[j, k]

    def fused(B, X, y, prior_sd):
        n, d = B.shape
        lp, ll = np.empty(n), np.empty(n)
        g_lp, g_ll = np.empty((n, d)), np.empty((n, d))
        log_norm = -d * math.log(prior_sd) - 0.5 * d * math.log(2 * math.pi)
        _kernel(B, X, y, 1.0 / prior_sd**2, log_norm, lp, ll, g_lp, g_ll, block, log1p)
        return lp, ll, g_lp, g_ll

    return fused


def interleaved_times(fns: dict, repeats: int, slow: set) -> dict:
    """Median wall ms, best wall ms and median CPU ms (this process, all threads) per
    method, timing the methods round-robin so that machine drift affects all of them
    alike. On a loaded machine the CPU time is the steadier number (it does not count
    waiting for a core); CPU above wall means more than one thread. Methods in ``slow``
    are timed every 5th round."""
    for fn in fns.values():
        fn()  # warm-up (JIT, caches)
    times = {name: [] for name in fns}
    cpu = {name: [] for name in fns}
    for r in range(repeats):
        for name, fn in fns.items():
            if name in slow and r % 5:
                continue
            c, t = time.process_time(), time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
            cpu[name].append(time.process_time() - c)
    return {k: (1e3 * float(np.median(v)), 1e3 * float(np.min(v)), 1e3 * float(np.median(cpu[k])))
            for k, v in times.items()}


def max_error(outs, ref) -> float:
    """Largest absolute difference over the four outputs."""
    return max(float(np.abs(np.asarray(a) - b).max()) for a, b in zip(outs, ref, strict=True))


def load_model(rows):
    from pymc_crais.datasets import load_pima
    from pymc_crais.models import logistic_regression

    data = load_pima()
    if rows is not None:
        data = type(data)(data.X[:rows], data.y[:rows], data.feature_names, data.name)
    return data, logistic_regression(data.X, data.y, prior_sd=5.0)


def compile_only(backend, rows) -> dict:
    """Compile the batched density in this (fresh) process; the seconds it took."""
    from pymc_crais.samplers.engine.compile import compile_model_density, resolve_compile_kwargs

    t0 = time.perf_counter()
    _, model = load_model(rows)
    t = time.perf_counter()
    dens = compile_model_density(model, compile_kwargs=resolve_compile_kwargs(backend, None))
    return {"compile_s": time.perf_counter() - t, "imports_and_model_s": t - t0, "vectorized": dens.vectorized}


def fresh_process_compile(backend, rows) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--compile-only", "--backend", str(backend)]
    if rows is not None:
        cmd += ["--rows", str(rows)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"rc {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="particles per batch")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--rows", type=int, default=None, help="use only the first ROWS rows of Pima")
    parser.add_argument("--backend", default=None,
                        help="PyTensor backend(s): c, numba, jax, comma-separated (default: PyTensor's)")
    parser.add_argument("--block", type=int, default=64, help="particles per block of the fused kernel")
    parser.add_argument("--threads", type=int, default=1,
                        help="BLAS threads (and XLA's CPU threads with 1); 0 = libraries' defaults. "
                             "The samplers run with one BLAS thread.")
    parser.add_argument("--compile-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads == 1:  # before JAX is imported
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()
    if args.threads > 0:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=args.threads)

    if args.compile_only:
        print(json.dumps(compile_only(None if args.backend == "None" else args.backend, args.rows)))
        return

    from pymc_crais.samplers.engine.compile import compile_model_density, resolve_compile_kwargs

    backends = [None] if args.backend is None else [b.strip() or None for b in args.backend.split(",")]
    data, model = load_model(args.rows)
    rng = np.random.default_rng(0)
    B = rng.normal(0.0, 1.0, size=(args.n, data.X.shape[1]))
    yf = data.y.astype(np.float64)
    X = np.ascontiguousarray(data.X)
    ref = numpy_logp_grad(B, X, yf, 5.0)

    # the linkers of the batched function: compile, run, check
    linkers = {}
    for b in backends:
        rec = {"backend": b or "default"}
        t = time.perf_counter()
        try:
            dens = compile_model_density(model, compile_kwargs=resolve_compile_kwargs(b, None))
            rec["compile_in_process_s"] = time.perf_counter() - t
            rec["linker"] = type(dens._fn_grad.maker.linker).__name__
            rec["vectorized"] = dens.vectorized
            ev = dens.evaluate(B, gradient=True)
            rec["err_evaluate"] = max_error((ev.log_q0, ev.delta, ev.grad_log_q0, ev.grad_delta), ref)
            rec["err_lp"] = max_error((ev.log_q0,), ref[:1])
            rec["err_rest"] = max_error((ev.delta, ev.grad_log_q0, ev.grad_delta), ref[1:])
            rec["err_raw"] = max_error(dens._fn_grad(B), ref)
            rec["density"] = dens
        except Exception as err:  # report, do not stop the other backends
            rec["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:120]}"
        rec["fresh"] = fresh_process_compile(b, args.rows) if len(backends) > 1 else {}
        linkers[rec["backend"]] = rec

    main_rec = linkers[backends[0] or "default"]
    if "error" in main_rec:
        raise SystemExit(f"the first backend failed: {main_rec['error']}")
    batched = main_rec["density"]
    looped = compile_model_density(model, vectorize=False,
                                   compile_kwargs=resolve_compile_kwargs(backends[0], None))

    t = time.perf_counter()
    fused = make_fused_numba(args.block)
    fused(B[:2], X, yf, 5.0)  # JIT (or load from Numba's cache)
    t_fused = time.perf_counter() - t
    err_fused = max_error(fused(B, X, yf, 5.0), ref)
    fused_log = make_fused_numba(args.block, log1p=False)
    err_fused_log = max_error(fused_log(B, X, yf, 5.0), ref)
    # PyMC's graph, without pymc_crais' rewrites (the effect of pymc_crais.samplers.engine.rewrites)
    plain = compile_model_density(model, simplify=False,
                                  compile_kwargs=resolve_compile_kwargs(backends[0], None))
    ev_plain = plain.evaluate(B, gradient=True)
    err_plain = max_error((ev_plain.delta, ev_plain.grad_log_q0, ev_plain.grad_delta), ref[1:])

    fns = {
        "batched (ModelDensity.evaluate)": lambda: batched.evaluate(B, gradient=True),
        "batched (raw compiled call)": lambda: [np.asarray(o) for o in batched._fn_grad(B)],
        "hand-written NumPy": lambda: numpy_logp_grad(B, X, yf, 5.0),
        "batched, simplify=False (PyMC's graph)": lambda: plain.evaluate(B, gradient=True),
        "fused Numba (1 core)": lambda: fused(B, X, yf, 5.0),
        "fused Numba, log(1+e) (1 core)": lambda: fused_log(B, X, yf, 5.0),
        "per-particle compiled loop": lambda: looped.evaluate(B, gradient=True),
    }
    for name, rec in linkers.items():
        if rec is not main_rec and "density" in rec:
            fns[f"batched evaluate, {name}"] = (lambda d: lambda: d.evaluate(B, gradient=True))(rec["density"])
            fns[f"batched raw call, {name}"] = (lambda d: lambda: [np.asarray(o) for o in d._fn_grad(B)])(rec["density"])
    rows = interleaved_times(fns, args.repeats, slow={"per-particle compiled loop"})

    numpy_ms, numpy_cpu = rows["hand-written NumPy"][0], rows["hand-written NumPy"][2]
    fused_ms, fused_cpu = rows["fused Numba (1 core)"][0], rows["fused Numba (1 core)"][2]
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"load average {os.getloadavg()[0]:.2f}; threads {args.threads or 'default'}; N = {args.n} particles, data {X.shape[0]} x {X.shape[1]}; "
          f"PyTensor linker: {main_rec['linker']}")
    print(f"compile time (logp + grad functions): {main_rec['compile_in_process_s']:.2f} s; "
          f"max |batched - NumPy|: log prior {main_rec['err_lp']:.2e}, likelihood and gradients "
          f"{main_rec['err_rest']:.2e}; "
          f"fused Numba: JIT/cache load {t_fused:.2f} s, max |fused - NumPy| = {err_fused:.2e} "
          f"(log(1+e) kernel {err_fused_log:.2e}); max |simplify=False - NumPy| (likelihood, gradients) = {err_plain:.2e}")
    print()
    print("| method | median ms | best ms | median CPU ms | / NumPy (wall) | / fused (wall) | / NumPy (CPU) | / fused (CPU) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (med, best, cpu) in rows.items():
        if name.startswith("batched evaluate, ") or name.startswith("batched raw call, "):
            continue
        print(f"| {name} | {med:.2f} | {best:.2f} | {cpu:.2f} | {med / numpy_ms:.2f} | {med / fused_ms:.2f} | "
              f"{cpu / numpy_cpu:.2f} | {cpu / fused_cpu:.2f} |")
    b_ms, b_cpu = rows["batched (ModelDensity.evaluate)"][0], rows["batched (ModelDensity.evaluate)"][2]
    loop_ms, loop_cpu = rows["per-particle compiled loop"][0], rows["per-particle compiled loop"][2]
    print()
    print(f"wall: batched / NumPy {b_ms / numpy_ms:.2f}x; batched / fused {b_ms / fused_ms:.2f}x; "
          f"NumPy / fused {numpy_ms / fused_ms:.2f}x; per-particle loop / batched {loop_ms / b_ms:.2f}x")
    print(f"CPU:  batched / NumPy {b_cpu / numpy_cpu:.2f}x; batched / fused {b_cpu / fused_cpu:.2f}x; "
          f"NumPy / fused {numpy_cpu / fused_cpu:.2f}x; per-particle loop / batched {loop_cpu / b_cpu:.2f}x")
    per = 1e6 / (args.n * X.shape[0])
    print(f"CPU ns per (particle, row): fused {per * fused_cpu:.1f}, NumPy {per * numpy_cpu:.1f}, batched {per * b_cpu:.1f}")
    fl_ms, fl_cpu = rows["fused Numba, log(1+e) (1 core)"][0], rows["fused Numba, log(1+e) (1 core)"][2]
    print(f"against the log(1+e) fused kernel: batched / fused {b_ms / fl_ms:.2f}x wall, {b_cpu / fl_cpu:.2f}x CPU")

    if len(backends) > 1:
        print()
        print("| linker | compile s (fresh process) | compile s (in process) | runs | max err log prior | "
              "max err lik. + grads | evaluate ms | raw call ms | evaluate CPU ms | evaluate / NumPy (CPU) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for name, rec in linkers.items():
            fresh = rec["fresh"].get("compile_s")
            fresh_s = f"{fresh:.2f}" if fresh is not None else rec["fresh"].get("error", "-")
            if "error" in rec:
                print(f"| {name} | {fresh_s} | - | no: {rec['error']} | - | - | - | - | - | - |")
                continue
            if rec is main_rec:
                ev, raw = rows["batched (ModelDensity.evaluate)"], rows["batched (raw compiled call)"]
            else:
                ev, raw = rows[f"batched evaluate, {name}"], rows[f"batched raw call, {name}"]
            ev_ms, raw_ms, cpu = ev[0], raw[0], ev[2]
            print(f"| {name} ({rec['linker']}) | {fresh_s} | {rec['compile_in_process_s']:.2f} | yes | "
                  f"{rec['err_lp']:.1e} | {rec['err_rest']:.1e} | {ev_ms:.2f} | {raw_ms:.2f} | {cpu:.2f} | {cpu / numpy_cpu:.2f} |")
        print("(compile s, fresh process: compile_model_density alone in a new interpreter, PyTensor's and "
              "Numba's on-disk caches as they are; raw call ms includes np.asarray of "
              "all outputs (JAX dispatches asynchronously); the log prior differs from NumPy's by PyMC's own Normal "
              "log-density constant, see benchmarks/reports/benchmarks.md)")


if __name__ == "__main__":
    main()
