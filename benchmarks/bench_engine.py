"""Where the time of an annealing step goes, and how it scales (Pima logistic regression).

    python benchmarks/bench_engine.py                      # all parts
    python benchmarks/bench_engine.py --parts a            # (a) only; also b, c, d, or a,b,c,d
    python benchmarks/bench_engine.py --parts b --png docs/img/engine_scaling.png

(a) Time per annealing step of the core loop (``compile_model_density`` + ``core.anneal``:
    prior start, geometric path, linear schedule, HMC with 3 leapfrog steps, 500 and 2000
    particles), split into the compiled model call (logp + gradients), the density
    wrapper's sanitizing, the kernel's own arithmetic (leapfrog, kinetic energy, accept,
    ``where``), the kernel's tuning between stages, the schedule, and the rest of the loop
    (weights, ``log Ẑ``, ESS, records); then a pyinstrument profile of one run, as the
    functions with the most self time.
(b) Wall time per step and peak memory against the number of particles
    N ∈ {1e2, 1e3, 1e4, 1e5} (768 rows) and against the data size (50, 200, 768 rows, and
    Pima tiled to 7680 rows; N = 1000). Each size runs in a fresh subprocess: wall and CPU
    time per step (median over the stages), the growth of the process's peak resident set
    (``ru_maxrss``) during the run, and the peak of the NumPy/Python allocations traced by
    ``tracemalloc`` in a second, shorter run (the arrays PyTensor's Numba code allocates
    internally are not traced; the resident set counts them). Writes the PNG.
(c) ``pmc.sample_ais`` on Pima, 2 chains, ``cores=1`` against ``cores=2`` (alternating,
    compile included in the wall time; ``sampling_time`` is the chains only), and what a
    worker pays per chain to unpickle the compiled density.
(d) ``pmc.sample_ais(backend=...)`` end to end for the Numba, C and JAX linkers with
    ``cores=1`` and ``cores=2``, each in a fresh process with a time limit: does it run,
    and does the same seed give the same ``log Z``?

All timings go with the machine's load average, printed alongside: on a shared machine
they are upper bounds. Markdown tables on stdout; no assertion.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from pymc_crais.core.density import BatchedDensity, Evaluation
from pymc_crais.core.kernels import HMC, MutationKernel
from pymc_crais.core.schedules import Schedule

PRIOR_SD = 5.0


# ----------------------------------------------------------------------------- timing wrappers
@dataclass
class TimedDensity(BatchedDensity):
    """Wraps a :class:`BatchedDensity`: times, per call, the model call (``_evaluate``)
    and the whole ``evaluate`` (model call + input check + output sanitizing)."""

    inner: BatchedDensity | None = None
    t_model: list = field(default_factory=list, init=False)
    t_evaluate: list = field(default_factory=list, init=False)

    def _evaluate(self, x: np.ndarray, gradient: bool) -> Evaluation:
        t = time.perf_counter()
        out = self.inner._evaluate(x, gradient)
        self.t_model.append(time.perf_counter() - t)
        return out

    def evaluate(self, x, gradient=False):
        t = time.perf_counter()
        out = super().evaluate(x, gradient)
        self.t_evaluate.append(time.perf_counter() - t)
        return out


class TimedKernel(MutationKernel):
    """Wraps a kernel; times ``tune`` and ``step`` (the latter includes its model calls)."""

    def __init__(self, inner: MutationKernel):
        self.inner = inner
        self.name = inner.name
        self.needs_gradient = inner.needs_gradient
        self.t_tune = 0.0
        self.t_step = 0.0

    def init(self, state):
        return self.inner.init(state)

    def tune(self, params, state, info, log_weights=None):
        t = time.perf_counter()
        out = self.inner.tune(params, state, info, log_weights)
        self.t_tune += time.perf_counter() - t
        return out

    def step(self, rng, state, density, path, tau, params):
        t = time.perf_counter()
        out = self.inner.step(rng, state, density, path, tau, params)
        self.t_step += time.perf_counter() - t
        return out

    def population_params(self, params):
        return self.inner.population_params(params)


class TimedSchedule(Schedule):
    """Wraps a schedule; times ``next_tau``."""

    def __init__(self, inner: Schedule):
        self.inner = inner
        self.t = 0.0

    def next_tau(self, stage, tau, state, log_weights, path):
        t = time.perf_counter()
        out = self.inner.next_tau(stage, tau, state, log_weights, path)
        self.t += time.perf_counter() - t
        return out

    def describe(self):
        return self.inner.describe()


# ----------------------------------------------------------------------------- set-up
def pima_data(rows: int | None = None, tile: int = 1):
    """Standardized Pima (first ``rows`` rows, or all rows tiled ``tile`` times)."""
    from pymc_crais.datasets import load_pima

    data = load_pima()
    X, y = data.X, data.y
    if rows is not None:
        X, y = X[:rows], y[:rows]
    if tile > 1:
        X, y = np.tile(X, (tile, 1)), np.tile(y, tile)
    return X, y


def compiled_density(X, y, backend=None):
    from pymc_crais.models import logistic_regression
    from pymc_crais.samplers.engine.compile import compile_model_density, resolve_compile_kwargs

    model = logistic_regression(X, y, prior_sd=PRIOR_SD)
    return compile_model_density(model, compile_kwargs=resolve_compile_kwargs(backend, None))


def run_anneal(density, n, n_steps, seed=0, callback=None):
    """One core-level AIS run from the prior (``β ~ N(0, 5² I)`` is the unconstrained prior)."""
    from pymc_crais.core.anneal import anneal
    from pymc_crais.core.paths import make_path
    from pymc_crais.core.schedules import make_fixed_schedule

    rng = np.random.default_rng(seed)
    x0 = rng.normal(0.0, PRIOR_SD, size=(n, density.dim))
    kernel = TimedKernel(HMC(n_leapfrog=3))
    schedule = TimedSchedule(make_fixed_schedule("linear", n_steps))
    t = time.perf_counter()
    res = anneal(rng, density, x0, make_path(0.0, 0.0), schedule, kernel, n_mcmc_steps=1,
                 resample="never", callback=callback)
    return res, time.perf_counter() - t, kernel, schedule


def load() -> str:
    return "/".join(f"{v:.2f}" for v in os.getloadavg())


# ----------------------------------------------------------------------------- (a)
def part_a(ns, n_steps, profile_n, profile_steps):
    from threadpoolctl import threadpool_limits

    X, y = pima_data()
    inner = compiled_density(X, y)
    print(f"## (a) time per annealing step: Pima 768 x 8, HMC 3 leapfrog, linear schedule, {n_steps} steps\n")
    print(f"load average before: {load()}\n")
    print("| N | ms / step | model call (logp+grad) | sanitizing (evaluate − model) | kernel arithmetic | "
          "kernel tuning | schedule | loop bookkeeping | model calls / step |")
    print("|---|---|---|---|---|---|---|---|---|")
    out = {}
    with threadpool_limits(limits=1):  # as the samplers run
        run_anneal(TimedDensity(inner.dim, inner=inner), 50, 3)  # warm-up
        for n in ns:
            dens = TimedDensity(inner.dim, inner=inner)
            res, wall, kern, sched = run_anneal(dens, n, n_steps)
            steps = res.n_stages
            # call 0 evaluates the initial population: not part of any step
            t_init_eval = dens.t_evaluate[0]
            model = float(np.sum(dens.t_model[1:]))
            evals_in_steps = float(np.sum(dens.t_evaluate[1:]))
            sanit = evals_in_steps - model
            kernel_arith = kern.t_step - evals_in_steps
            book = wall - t_init_eval - kern.t_step - kern.t_tune - sched.t
            parts = {"model": model, "sanitize": sanit, "kernel": kernel_arith, "tune": kern.t_tune,
                     "schedule": sched.t, "bookkeeping": book}
            total = wall - t_init_eval
            cells = " | ".join(f"{1e3 * v / steps:.1f} ({100 * v / total:.0f} %)" for v in parts.values())
            print(f"| {n} | {1e3 * total / steps:.1f} | {cells} | {(len(dens.t_evaluate) - 1) / steps:.0f} |")
            out[n] = {k: v / steps for k, v in parts.items()}
    print(f"\nload average after: {load()}. Cells: ms per step (share of the step). The initial "
          "population's evaluation is excluded; 'loop bookkeeping' is the anneal loop minus the kernel's "
          "step and tune and the schedule (weights, log Z increment, ESS, records, callback).\n")

    # profile
    from pyinstrument import Profiler

    dens = TimedDensity(inner.dim, inner=inner)
    prof = Profiler(interval=0.0005)
    with threadpool_limits(limits=1):
        prof.start()
        run_anneal(dens, profile_n, profile_steps)
        prof.stop()
    print(f"### pyinstrument profile: N = {profile_n}, {profile_steps} steps (self time by function, top 20)\n")
    print_profile(prof.last_session, 20)
    return out


def print_profile(session, top):
    """Aggregate self time per function over pyinstrument's call tree."""
    agg = {}

    def walk(frame):
        if not frame.is_synthetic:  # a '[self]' leaf repeats its parent's self time
            key = (frame.function, frame.file_path_short or frame.file_path or "?", frame.line_no)
            agg[key] = agg.get(key, 0.0) + frame.total_self_time
        for child in frame.children:
            walk(child)

    root = session.root_frame()
    walk(root)
    total = root.time
    print("| function | file:line | self s | share |")
    print("|---|---|---|---|")
    for (fn, path, line), t in sorted(agg.items(), key=lambda kv: -kv[1])[:top]:
        rel = path
        for marker in ("site-packages/", "/work/main/"):
            if marker in rel:
                rel = rel.split(marker, 1)[1]
        print(f"| `{fn}` | {rel}:{line} | {t:.2f} | {100 * t / total:.1f} % |")
    print(f"\n(total {total:.2f} s sampled)\n")


# ----------------------------------------------------------------------------- (b)
def one_size(n, rows, tile, n_steps, trace_steps):
    """Measure one size in this (fresh) process; returns a dict."""
    import tracemalloc

    from threadpoolctl import threadpool_limits

    X, y = pima_data(rows, tile)
    t = time.perf_counter()
    dens = compiled_density(X, y)
    t_compile = time.perf_counter() - t
    stamps = []
    with threadpool_limits(limits=1):
        run_anneal(dens, 20, 2)  # warm-up on a tiny population
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        cpu0 = time.process_time()

        def cb(stage, tau, ess, acc):
            stamps.append((time.perf_counter(), time.process_time()))

        t0 = (time.perf_counter(), time.process_time())
        res, wall, _, _ = run_anneal(dens, n, n_steps, callback=cb)
        rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        cpu = time.process_time() - cpu0
        # per-stage times from the callbacks (the first stage also pays the initial evaluation)
        st = np.array([t0] + stamps)
        per = np.diff(st, axis=0)[1:] if len(stamps) > 1 else np.diff(st, axis=0)
        tracemalloc.start()
        run_anneal(dens, n, trace_steps)
        _, traced_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return {
        "n": n, "rows": X.shape[0], "steps": res.n_stages, "compile_s": t_compile,
        "ms_per_step": 1e3 * float(np.median(per[:, 0])), "cpu_ms_per_step": 1e3 * float(np.median(per[:, 1])),
        "wall_s": wall, "cpu_s": cpu,
        "rss_before_mb": rss0 / 1024, "rss_peak_mb": rss1 / 1024, "rss_growth_mb": (rss1 - rss0) / 1024,
        "traced_peak_mb": traced_peak / 2**20,
        "particle_array_mb": n * dens.dim * 8 / 2**20, "eta_mb": n * X.shape[0] * 8 / 2**20,
        "load": os.getloadavg()[0],
    }


def run_size(n, rows, tile, n_steps, trace_steps):
    cmd = [sys.executable, os.path.abspath(__file__), "--one-size", json.dumps([n, rows, tile, n_steps, trace_steps])]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"n": n, "rows": rows, "error": (proc.stderr.strip().splitlines() or [f"rc {proc.returncode}"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def print_sizes(results, title):
    print(f"### {title}\n")
    print("| N | rows | steps timed | ms / step (wall) | ms / step (CPU) | CPU ns / (particle·row·call) | "
          "peak RSS MB | RSS growth MB | traced peak MB | one (N, rows) array MB | compile s | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        if "error" in r:
            print(f"| {r['n']} | {r['rows']} | failed: {r['error']} |")
            continue
        ns = 1e6 * r["cpu_ms_per_step"] / (r["n"] * r["rows"]) / 3  # 3 leapfrog calls per step
        print(f"| {r['n']} | {r['rows']} | {r['steps']} | {r['ms_per_step']:.1f} | {r['cpu_ms_per_step']:.1f} | "
              f"{ns:.0f} | {r['rss_peak_mb']:.0f} | {r['rss_growth_mb']:.0f} | {r['traced_peak_mb']:.1f} | "
              f"{r['eta_mb']:.1f} | {r['compile_s']:.1f} | {r['load']:.2f} |")
    print()


def part_b(ns, rows_list, png):
    print("## (b) scaling (each size in a fresh subprocess, HMC 3 leapfrog, 1 BLAS thread)\n")
    steps_for_n = {100: 20, 1000: 10, 10_000: 4, 100_000: 2}
    by_n = []
    for n in ns:
        r = run_size(n, None, 1, steps_for_n.get(n, 3), 2)
        by_n.append(r)
        print(f"<!-- N={n}: {json.dumps(r)} -->", flush=True)
    by_rows = []
    for rows in rows_list:
        rows_arg, tile = (None, rows // 768) if rows > 768 else (rows, 1)
        r = run_size(1000, rows_arg, tile, 10, 2)
        by_rows.append(r)
        print(f"<!-- rows={rows}: {json.dumps(r)} -->", flush=True)
    print()
    print_sizes(by_n, "in N (768 rows)")
    print_sizes(by_rows, "in data size (N = 1000; 7680 rows = Pima tiled 10 times)")
    print("CPU ns / (particle·row·call): CPU time per step / (3 model calls · N · rows); the steps' "
          "first stage (which also evaluates the initial population) is not timed. Peak RSS includes the "
          "interpreter, PyMC and the compiled functions (the 'before' level is the RSS growth's baseline); "
          "'traced' counts NumPy/Python allocations only.\n")
    if png:
        plot(by_n, by_rows, png)
    return by_n, by_rows


def plot(by_n, by_rows, png):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    ok = [r for r in by_n if "error" not in r]
    n = np.array([r["n"] for r in ok], dtype=float)
    ax = axes[0]
    ax.loglog(n, [r["ms_per_step"] for r in ok], "o-", label="wall")
    ax.loglog(n, [r["cpu_ms_per_step"] for r in ok], "s--", label="CPU")
    ax.loglog(n, n * ok[0]["cpu_ms_per_step"] / n[0], ":", color="grey", label="∝ N")
    ax.set(xlabel="particles N", ylabel="ms per annealing step", title="time per step (768 rows)")
    ax.legend()
    ax = axes[1]
    ax.loglog(n, [r["rss_peak_mb"] for r in ok], "o-", label="peak RSS (whole process)")
    ax.loglog(n, [r["rss_before_mb"] for r in ok], "^:", color="C0", alpha=0.6, label="RSS before the run")
    ax.loglog(n, [max(r["traced_peak_mb"], 1e-2) for r in ok], "s--", label="traced (NumPy) peak")
    ax.loglog(n, [r["eta_mb"] for r in ok], ":", color="grey", label="one (N, rows) float64 array")
    ax.set(xlabel="particles N", ylabel="MB", title="memory during the run (768 rows)")
    ax.legend(fontsize=8)
    ax = axes[2]
    okr = [r for r in by_rows if "error" not in r]
    rows = np.array([r["rows"] for r in okr], dtype=float)
    ax.loglog(rows, [r["ms_per_step"] for r in okr], "o-", label="wall")
    ax.loglog(rows, [r["cpu_ms_per_step"] for r in okr], "s--", label="CPU")
    ax.loglog(rows, rows * okr[-1]["cpu_ms_per_step"] / rows[-1], ":", color="grey", label="∝ rows")
    ax.set(xlabel="data rows", ylabel="ms per annealing step", title="time per step (N = 1000)")
    ax.legend()
    fig.suptitle("pymc_crais engine: Pima logistic regression, HMC (3 leapfrog), Numba linker, 1 core "
                 f"(load avg {ok[0]['load']:.1f}–{max(r['load'] for r in ok):.1f})", fontsize=10)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(png)), exist_ok=True)
    fig.savefig(png, dpi=110)
    print(f"wrote {png}\n")


# ----------------------------------------------------------------------------- (c)
def part_c(draws, n_steps, repeats):
    import pymc_crais as pmc
    from pymc_crais.models import logistic_regression

    X, y = pima_data()
    model = logistic_regression(X, y, prior_sd=PRIOR_SD)
    print(f"## (c) sample_ais on Pima, 2 chains x {draws} particles x {n_steps} steps, HMC 3 leapfrog\n")
    pmc.sample_ais(model=model, draws=50, n_steps=5, chains=1, cores=1, random_seed=0, progressbar=False)  # warm caches
    rows = []
    for rep in range(repeats):
        for cores in (1, 2):
            la = os.getloadavg()[0]
            r_self, r_kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            idata = pmc.sample_ais(model=model, draws=draws, n_steps=n_steps, chains=2, cores=cores,
                                   random_seed=1, progressbar=False)
            wall = time.perf_counter() - t
            r_self2, r_kids2 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = sum(getattr(b, f) - getattr(a, f) for a, b in ((r_self, r_self2), (r_kids, r_kids2))
                      for f in ("ru_utime", "ru_stime"))
            st = idata.sample_stats
            lz = np.asarray(st["log_marginal_likelihood"]).ravel()
            rows.append({"rep": rep, "cores": cores, "wall": wall, "sampling": float(st.attrs["sampling_time"]),
                         "cpu": cpu, "log_z": lz.tolist(), "load": la})
            print(f"<!-- {json.dumps(rows[-1])} -->", flush=True)
    print("\n| repeat | cores | wall s (whole call; the model is compiled once per process) | sampling s (chains) | CPU s (this process + workers) | "
          "log Z per chain | load before |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['rep']} | {r['cores']} | {r['wall']:.1f} | {r['sampling']:.1f} | {r['cpu']:.1f} | "
              f"{', '.join(f'{v:.4f}' for v in r['log_z'])} | {r['load']:.2f} |")
    for key in ("wall", "sampling", "cpu"):
        one = np.median([r[key] for r in rows if r["cores"] == 1])
        two = np.median([r[key] for r in rows if r["cores"] == 2])
        label = "speed-up" if key != "cpu" else "CPU ratio cores=2 / cores=1 (overhead of the workers)"
        ratio = one / two if key != "cpu" else two / one
        print(f"\n{key}: median cores=1 {one:.1f} s, cores=2 {two:.1f} s, {label} {ratio:.2f}x")
    same = all(np.array_equal(rows[i]["log_z"], rows[i + 1]["log_z"]) for i in range(0, len(rows) - 1, 2))
    print(f"\nlog Z identical for cores=1 and cores=2: {same}\n")
    worker_setup_cost(X, y)
    return rows


def worker_setup_cost(X, y, repeats: int = 2):
    """What a worker pays per chain before annealing: a fresh interpreter importing
    pymc_crais, unpickling the compiled density (cloudpickle, as ``sample_ais`` sends it;
    PyTensor re-links the function on unpickling) and its first call."""
    import tempfile

    import cloudpickle

    dens = compiled_density(X, y)
    with tempfile.NamedTemporaryFile(suffix=".pkl", delete=False) as f:
        f.write(cloudpickle.dumps(dens))
        path = f.name
    code = (
        "import json, time; t0 = time.perf_counter(); import cloudpickle, numpy as np, pymc_crais; "
        "t1 = time.perf_counter(); "
        f"d = cloudpickle.loads(open({path!r}, 'rb').read()); t2 = time.perf_counter(); "
        "d.evaluate(np.zeros((4, d.dim)), gradient=True); t3 = time.perf_counter(); "
        "print(json.dumps([t1 - t0, t2 - t1, t3 - t2]))"
    )
    print("per-chain worker set-up (fresh interpreter): import s, unpickle (re-link) s, first call s, load")
    try:
        for _ in range(repeats):
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"  failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
                continue
            imp, unp, first = json.loads(proc.stdout.strip().splitlines()[-1])
            print(f"  {imp:.2f}, {unp:.2f}, {first:.3f}, load {os.getloadavg()[0]:.2f}")
    finally:
        os.unlink(path)
    blob = cloudpickle.dumps(dens)
    t = time.perf_counter()
    d2 = cloudpickle.loads(blob)
    t_unpickle = time.perf_counter() - t
    t = time.perf_counter()
    d2.evaluate(np.zeros((4, d2.dim)), gradient=True)
    t_first = time.perf_counter() - t
    import multiprocessing

    print(f"the same in this warm process (what a forked worker inherits): unpickle (re-link) {t_unpickle:.2f} s, "
          f"first call {t_first:.3f} s; pickled density {len(blob) / 1024:.0f} KiB; "
          f"default start method here: {multiprocessing.get_start_method()}\n")


_SMOKE = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
import numpy as np
import pymc_crais as pmc
from pymc_crais.datasets import load_pima
from pymc_crais.models import logistic_regression
d = load_pima()
m = logistic_regression(d.X, d.y, prior_sd=5.0)
backend, cores, draws, n_steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
mp_ctx = None if sys.argv[5] == "default" else sys.argv[5]
out = []
for _ in range(2):  # the same seed twice: reproducible?
    t = time.perf_counter()
    idata = pmc.sample_ais(model=m, draws=draws, n_steps=n_steps, chains=2, cores=cores, random_seed=1,
                           progressbar=False, backend=backend, mp_ctx=mp_ctx)
    out.append([time.perf_counter() - t, np.asarray(idata.sample_stats["log_marginal_likelihood"]).ravel().tolist()])
print(json.dumps(out))
"""


def part_d(backends, draws, n_steps, timeout, mp_ctx="default"):
    """``sample_ais(backend=...)`` end to end, each setting in a fresh process with a time limit."""
    print(f"## (d) sample_ais(backend=...) on Pima: 2 chains x {draws} particles x {n_steps} steps, "
          f"random_seed=1, run twice per process; limit {timeout} s per process; worker start method: {mp_ctx}\n")
    print("| backend | cores | runs | wall s (1st call, compile incl.; 2nd call) | log Z per chain (1st call) | "
          "same seed, same log Z | load |")
    print("|---|---|---|---|---|---|---|")
    for b in backends:
        for cores in (1, 2):
            cmd = [sys.executable, "-c", _SMOKE, b, str(cores), str(draws), str(n_steps), mp_ctx]
            la = os.getloadavg()[0]
            # own process group, so that a hung run's pool workers are stopped with it
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    start_new_session=True)
            try:
                stdout, stderr = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                print(f"| {b} | {cores} | no: no result within {timeout} s (hung) | - | - | - | {la:.2f} |", flush=True)
                continue
            if proc.returncode != 0:
                err = (stderr.strip().splitlines() or [f"rc {proc.returncode}"])[-1][:150]
                print(f"| {b} | {cores} | no: {err} | - | - | - | {la:.2f} |", flush=True)
                continue
            (w1, z1), (w2, z2) = json.loads(stdout.strip().splitlines()[-1])
            print(f"| {b} | {cores} | yes | {w1:.1f}; {w2:.1f} | {', '.join(f'{v:.4f}' for v in z1)} | "
                  f"{z1 == z2} | {la:.2f} |", flush=True)
    print()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="a,b,c,d")
    parser.add_argument("--steps", type=int, default=30, help="(a) annealing steps per run")
    parser.add_argument("--ns", default="500,2000", help="(a) particle counts")
    parser.add_argument("--profile-n", type=int, default=2000)
    parser.add_argument("--profile-steps", type=int, default=20)
    parser.add_argument("--scale-ns", default="100,1000,10000,100000", help="(b) particle counts")
    parser.add_argument("--scale-rows", default="50,200,768,7680", help="(b) data rows (> 768: Pima tiled)")
    parser.add_argument("--png", default="docs/img/engine_scaling.png")
    parser.add_argument("--draws", type=int, default=500, help="(c) particles per chain")
    parser.add_argument("--ais-steps", type=int, default=100, help="(c) annealing steps")
    parser.add_argument("--repeats", type=int, default=2, help="(c) repeats of each setting")
    parser.add_argument("--backends", default="numba,c,jax", help="(d) PyTensor backends")
    parser.add_argument("--smoke-draws", type=int, default=200, help="(d) particles per chain")
    parser.add_argument("--smoke-steps", type=int, default=20, help="(d) annealing steps")
    parser.add_argument("--smoke-timeout", type=int, default=150, help="(d) seconds per process")
    parser.add_argument("--smoke-mp-ctx", default="default", help="(d) worker start method (spawn, forkserver)")
    parser.add_argument("--one-size", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.one_size is not None:
        print(json.dumps(one_size(*json.loads(args.one_size))))
        return

    parts = set(args.parts.split(","))
    import numpy
    import pymc
    import pytensor

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores; Python {platform.python_version()}, "
          f"NumPy {numpy.__version__}, PyMC {pymc.__version__}, PyTensor {pytensor.__version__} "
          f"(mode {pytensor.config.mode}); load average {load()}\n")
    if "a" in parts:
        part_a([int(v) for v in args.ns.split(",")], args.steps, args.profile_n, args.profile_steps)
    if "b" in parts:
        part_b([int(v) for v in args.scale_ns.split(",")], [int(v) for v in args.scale_rows.split(",")], args.png)
    if "c" in parts:
        part_c(args.draws, args.ais_steps, args.repeats)
    if "d" in parts:
        part_d(args.backends.split(","), args.smoke_draws, args.smoke_steps, args.smoke_timeout, args.smoke_mp_ctx)


if __name__ == "__main__":
    main()
