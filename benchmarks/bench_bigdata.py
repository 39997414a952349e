"""Big data: synthetic logistic regression with n = 10³ … 10⁶ rows, time and peak memory.

    python benchmarks/bench_bigdata.py [--rows 1e3,1e4,1e5,1e6] [--dims 20] [--particles 256]
        [--backends numba,jax] [--run-rows 1e3,1e4] [--pymc-rows 1e3,1e4] [--pymc-timeout 300]
        [--run-chains 2] [--run-memory-budget BYTES] [--memory] [--shapes]
        [--json benchmarks/out/bigdata.json]

Every measurement runs in a fresh interpreter (so that its peak resident memory, from
``resource.getrusage``, is its own), with BLAS and XLA limited to one thread:

* **call**: one batched log-density + gradient call on ``--particles`` particles, through the
  model density the samplers use, with the default ``memory_budget`` (1 GiB; the particles are
  evaluated in blocks when the estimate of one call exceeds it): seconds per call (best of a
  few after a warm-up), the process's peak RSS, and the peak's growth during the calls over
  the resident memory before them (what the budget bounds).
* **run**: ``pmc.sample_smc`` with its defaults (``--particles`` draws, 2 chains; the call a
  ``pm.sample_smc`` user writes) for the rows in ``--run-rows``: wall time, the chains'
  sampling time (without compilation), model evaluations, ``log Z ± MCSE``, whether
  ``UnreliableEvidenceWarning`` was raised, peak RSS. With JAX the two chains run in one
  process and one batched call; with Numba, one after the other (``cores=1``).
* **pm.sample_smc**: PyMC's sampler with its defaults (``draws=--particles``, one chain),
  killed after ``--pymc-timeout`` seconds (reported as "did not finish").
* ``--memory``: the calibration of ``pymc_crais.samplers.engine.memory.BYTES_PER_ELEMENT``: the growth
  of the peak RSS of one unblocked call against particles × rows.
* ``--shapes``: the resident memory each new batch shape keeps (1, 2, …, 6 particles, one
  call each with gradient) for every ``--rows``; with JAX every shape is compiled anew.

GPU rows are measured only where the JAX backend finds a GPU (``jax.devices()``); this script
never estimates them. Prints a Markdown table for benchmarks/reports/benchmarks.md and writes the records
to ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

SINGLE_THREAD = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
}


def _rss_now() -> int:
    """Resident memory of this process now, in bytes (Linux)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_rss() -> int:
    """Peak resident memory of this process so far, in bytes (Linux: ru_maxrss in KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class _RssTrace:
    """Polls this process's resident memory every ``every`` seconds in a thread and keeps
    the highest value and when it was seen (seconds from the start): which phase of a run
    (compilation and set-up, or sampling) holds the peak."""

    def __init__(self, every: float = 0.05):
        import threading

        self.every, self.t0, self.max_rss, self.max_at = every, time.perf_counter(), 0, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(self.every):
            rss = _rss_now()
            if rss > self.max_rss:
                self.max_rss, self.max_at = rss, time.perf_counter() - self.t0

    def stop(self) -> tuple[float, float]:
        self._stop.set()
        self._thread.join()
        return self.max_rss / 2**20, self.max_at


def _device_memory(rec: dict) -> None:
    """The peak memory JAX's default device reports (``memory_stats()``: GPUs and TPUs), as
    ``device_peak_mb``, or ``None`` with the reason in ``device_memory_note`` (JAX's CPU
    client reports none: there the host's RSS is the device's memory)."""
    import jax

    dev = jax.devices()[0]
    stats = dev.memory_stats() if hasattr(dev, "memory_stats") else None
    if stats and "peak_bytes_in_use" in stats:
        rec["device_peak_mb"] = stats["peak_bytes_in_use"] / 2**20
        rec["device_limit_mb"] = stats.get("bytes_limit", 0) / 2**20 or None
        rec["device_memory_note"] = f"{dev.platform}: memory_stats()['peak_bytes_in_use']"
    else:
        rec["device_peak_mb"] = None
        rec["device_memory_note"] = (
            f"{dev.platform}: memory_stats() reports nothing"
            + (" (JAX's CPU device: the host RSS is its memory)" if dev.platform == "cpu" else "")
        )


def _model(n: int, d: int, seed: int = 0):
    import pymc_crais as pmc

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    beta = rng.normal(0.0, 0.5, size=d)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(X @ beta)))).astype(np.int64)
    return pmc.models.logistic_regression(X, y, prior_sd=1.0)


def _backend_kw(backend: str) -> dict:
    return {} if backend == "numba" else {"backend": backend}


def worker(spec: dict) -> dict:
    """One measurement in this (fresh) process; returns a JSON-able record."""
    kind, n, d, N = spec["kind"], int(spec["rows"]), int(spec["dim"]), int(spec["particles"])
    rec = dict(spec)
    t0 = time.perf_counter()
    model = _model(n, d)
    if kind == "pymc":
        import pymc as pm

        with model:
            idata = pm.sample_smc(draws=N, chains=1, cores=1, progressbar=False, random_seed=1)
        rec["wall_s"] = time.perf_counter() - t0
        import pymc_crais as pmc

        rec["log_z"] = float(pmc.log_marginal_likelihood(idata)[0])
        rec["peak_rss_mb"] = _peak_rss() / 2**20
        return rec
    import pymc_crais as pmc
    from pymc_crais.samplers.engine.compile import compile_model_density, resolve_compile_kwargs
    from pymc_crais.samplers.engine.memory import (
        block_rows,
        check_memory_budget,
        jax_on_accelerator,
    )

    ckw = resolve_compile_kwargs(spec["backend"] if spec["backend"] != "numba" else None, None)
    if spec["backend"] == "jax":
        import jax

        rec["device"] = str(jax.devices()[0])
    if kind == "run":
        import warnings

        if spec.get("pad") is False:  # an A/B of the padded calls (gpu_run_budgets.py)
            from pymc_crais.samplers.engine import pipeline

            pipeline.jax_on_accelerator = lambda: False

        chains = int(spec.get("chains", 2))
        rec["chains"] = chains
        rec["budget_mb"] = check_memory_budget(spec.get("memory_budget")) / 2**20
        # what the process holds before sampling: libraries, the data, the model graph
        rec["rss_before_run_mb"] = _rss_now() / 2**20
        trace = _RssTrace()
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", pmc.UnreliableEvidenceWarning)
            budget = {} if spec.get("memory_budget") is None else {"memory_budget": spec["memory_budget"]}
            res = pmc.sample_smc(
                model=model, draws=N, chains=chains, cores=1, random_seed=1,
                progressbar=False, **_backend_kw(spec["backend"]), **budget,
            )
        rec["wall_s"] = time.perf_counter() - t0
        rec["polled_max_rss_mb"], rec["polled_max_at_s"] = trace.stop()
        rec["unreliable_warning"] = any(
            issubclass(w.category, pmc.UnreliableEvidenceWarning) for w in caught
        )
        rec["sampling_s"] = float(res.sample_stats.attrs["sampling_time"])
        rec["n_logp_evals"] = int(res.sample_stats["n_logp_evals"].values.sum())
        rec["log_z"], rec["mcse"] = pmc.log_marginal_likelihood(res)
        rec["peak_rss_mb"] = _peak_rss() / 2**20
        if spec["backend"] == "jax":
            _device_memory(rec)
        return rec
    dens = compile_model_density(model, gradient=True, compile_kwargs=ckw)
    if kind == "shapes":  # resident memory kept by each new batch shape (JAX compiles each)
        rng = np.random.default_rng(2)
        rec["rss_after_compile_mb"] = _rss_now() / 2**20
        rec["rss_after_shape_mb"] = []
        for size in spec["sizes"]:
            dens.evaluate(rng.standard_normal((size, d)) * 0.1, gradient=True)
            rec["rss_after_shape_mb"].append(_rss_now() / 2**20)
        return rec
    budget = check_memory_budget(spec.get("memory_budget"))
    dens.block_rows = block_rows(model, dens.dim, budget, jax=spec["backend"] == "jax")
    rec["block_rows"] = dens.block_rows
    dens.pad_rows = spec["backend"] == "jax" and jax_on_accelerator()  # as the samplers do
    rec["pad_rows"] = dens.pad_rows
    rng = np.random.default_rng(2)
    # warm-up (JIT, JAX's compilation of each shape); the calibration warms up on 2 particles
    # only, so that the timed call's memory is allocated fresh (JAX's allocator keeps it)
    warm = int(spec.get("warmup_rows", min(N, dens.block_rows or N)))
    dens.evaluate(rng.standard_normal((warm, d)) * 0.1, gradient=True)
    if dens.block_rows is not None and N % dens.block_rows:  # JAX compiles each shape once
        dens.evaluate(rng.standard_normal((N % dens.block_rows, d)) * 0.1, gradient=True)
    x = rng.standard_normal((N, d)) * 0.1
    rss_before, peak_before = _rss_now(), _peak_rss()
    times = []
    for _ in range(int(spec.get("repeats", 3))):
        t = time.perf_counter()
        dens.evaluate(x, gradient=True)
        times.append(time.perf_counter() - t)
        if sum(times) > 20:
            break
    rec["call_s"] = min(times)
    rec["peak_rss_mb"] = _peak_rss() / 2**20
    rec["call_growth_mb"] = max(0, _peak_rss() - rss_before) / 2**20
    rec["peak_grew"] = _peak_rss() > peak_before
    if spec["backend"] == "jax":
        _device_memory(rec)
    return rec


def run_one(spec: dict, timeout: float, env: dict | None = None) -> dict:
    """``worker(spec)`` in a fresh interpreter (BLAS and XLA on one thread, ``env`` added to
    the environment), killed after ``timeout`` seconds; its record, or ``spec`` with an
    ``error``."""
    env = {**os.environ, **SINGLE_THREAD, **(env or {})}
    cmd = [sys.executable, __file__, "--worker", json.dumps(spec)]
    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout,
                             env=env)
    except subprocess.TimeoutExpired:
        return {**spec, "error": f"did not finish in {timeout:.0f} s"}
    if out.returncode != 0:
        return {**spec, "error": out.stderr.strip().splitlines()[-1][:200] if out.stderr else "failed"}
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    rec["process_s"] = time.perf_counter() - t0
    return rec


def _fmt(rec: dict, key: str, fmt: str) -> str:
    return "—" if key not in rec or rec[key] is None else format(rec[key], fmt)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--rows", default="1e3,1e4,1e5,1e6")
    p.add_argument("--dims", default="20")
    p.add_argument("--particles", type=int, default=256)
    p.add_argument("--backends", default="numba,jax")
    p.add_argument("--run-rows", default="1e3,1e4")
    p.add_argument("--run-chains", type=int, default=2, help="chains of the whole runs")
    p.add_argument("--run-memory-budget", type=float, default=None,
                   help="memory_budget (bytes) of the whole runs (default: the sampler's, 1 GiB)")
    p.add_argument("--pymc-rows", default="1e3,1e4")
    p.add_argument("--pymc-timeout", type=float, default=300.0)
    p.add_argument("--timeout", type=float, default=900.0)
    p.add_argument("--kinds", default="call,run,pymc", help="which measurements to make")
    p.add_argument("--memory", action="store_true", help="calibrate BYTES_PER_ELEMENT only")
    p.add_argument("--shapes", action="store_true",
                   help="resident memory after each new batch shape (1..6 particles), per row count")
    p.add_argument("--json", default="benchmarks/out/bigdata.json")
    a = p.parse_args(argv)
    if a.worker:
        print(json.dumps(worker(json.loads(a.worker))))
        return {}
    rows = [int(float(r)) for r in a.rows.split(",") if r]
    dims = [int(x) for x in a.dims.split(",") if x]
    backends = [b for b in a.backends.split(",") if b]
    records = []
    if a.shapes:
        for n in rows:
            rec = run_one({"kind": "shapes", "rows": n, "dim": dims[0], "particles": 0,
                           "backend": backends[0], "sizes": [1, 2, 3, 4, 5, 6]}, a.timeout)
            records.append(rec)
            steps = np.diff([rec.get("rss_after_compile_mb", np.nan),
                             *rec.get("rss_after_shape_mb", [np.nan])])
            print(f"n={n:>7} {backends[0]}: MiB kept by each new shape 1..6: "
                  + ", ".join(f"{x:.0f}" for x in steps), flush=True)
    elif a.memory:
        for n, N in [(100_000, 33), (100_000, 66), (100_000, 132), (20_000, 250), (20_000, 500)]:
            spec = {"kind": "call", "rows": n, "dim": dims[0], "particles": N, "warmup_rows": 2,
                    "backend": backends[0], "memory_budget": float("inf"), "repeats": 1}
            rec = run_one(spec, a.timeout)
            records.append(rec)
            grow = rec.get("call_growth_mb", float("nan")) * 2**20
            print(f"n={n:>7} N={N:>4}: call growth {grow / 2**20:8.1f} MiB = "
                  f"{grow / (n * N):6.1f} bytes per particle and row", flush=True)
    else:
        kinds = set(a.kinds.split(","))
        for d in dims:
            for n in rows:
                for b in backends if "call" in kinds else ():
                    rec = run_one({"kind": "call", "rows": n, "dim": d, "particles": a.particles,
                                   "backend": b}, a.timeout)
                    records.append(rec)
                    print(json.dumps(rec), flush=True)
                for b in backends if "run" in kinds else ():
                    if n in {int(float(r)) for r in a.run_rows.split(",") if r}:
                        rec = run_one({"kind": "run", "rows": n, "dim": d,
                                       "particles": a.particles, "backend": b,
                                       "chains": a.run_chains,
                                       "memory_budget": a.run_memory_budget}, a.timeout)
                        records.append(rec)
                        print(json.dumps(rec), flush=True)
                if "pymc" in kinds and n in {int(float(r)) for r in a.pymc_rows.split(",") if r}:
                    rec = run_one({"kind": "pymc", "rows": n, "dim": d, "particles": a.particles,
                                   "backend": "pm.sample_smc"}, a.pymc_timeout)
                    records.append(rec)
                    print(json.dumps(rec), flush=True)
        print()
        print("| rows n | d | backend | device | one call (s) | block | peak RSS (MiB) | call's growth (MiB) |")
        print("|---|---|---|---|---|---|---|---|")
        for r in records:
            if r["kind"] != "call":
                continue
            err = r.get("error")
            print(f"| {r['rows']:,} | {r['dim']} | {r['backend']} | {r.get('device', 'cpu')} | "
                  f"{err or _fmt(r, 'call_s', '.3f')} | {r.get('block_rows') or 'all'} | "
                  f"{_fmt(r, 'peak_rss_mb', '.0f')} | {_fmt(r, 'call_growth_mb', '.0f')} |")
        print()
        print("| rows n | d | run | wall (s) | chains' sampling (s) | model evals | log Z ± MCSE | peak RSS (MiB) |")
        print("|---|---|---|---|---|---|---|---|")
        for r in records:
            if r["kind"] == "call":
                continue
            name = ("pm.sample_smc (1 chain)" if r["kind"] == "pymc"
                    else f"pmc.sample_smc {r['backend']} ({r.get('chains', 2)} chains)")
            if r.get("unreliable_warning"):
                name += ", warned"
            lz = (f"{r['log_z']:.2f} ± {r['mcse']:.2f}" if "mcse" in r
                  else _fmt(r, "log_z", ".2f"))
            print(f"| {r['rows']:,} | {r['dim']} | {name} | {r.get('error') or _fmt(r, 'wall_s', '.1f')} | "
                  f"{_fmt(r, 'sampling_s', '.1f')} | {r.get('n_logp_evals', '—')} | {lz if 'error' not in r else '—'} | "
                  f"{_fmt(r, 'peak_rss_mb', '.0f')} |")
    out = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
           "load": os.getloadavg(), "records": records}
    if a.json:
        os.makedirs(os.path.dirname(a.json) or ".", exist_ok=True)
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return out


if __name__ == "__main__":
    main()
