"""A new user's first call: ``pmc.sample_smc()`` against ``pm.sample_smc()``, cold caches.

    python benchmarks/first_call.py [--repeat 2] [--only pmc|pm] [--profile] [--json PATH]

Each run is a fresh Python process with its own empty compile caches (a new temporary
``PYTENSOR_FLAGS=base_compiledir=...``, which holds PyTensor's C cache and the Numba cache of
its Numba backend, and a new ``NUMBA_CACHE_DIR``), as on a new machine. The process imports
PyMC (and pymc_crais for ours), builds a small regression (intercept ``N(0, 10)``, slope
``N(0, 2)``, sigma ``HalfNormal(2)``, 100 rows) and calls the sampler with its defaults
(``random_seed=1`` and ``progressbar=False`` only). The two samplers alternate
(pmc, pm, pmc, pm, ...), ``--repeat`` runs each.

Measured for every run, from this process: the wall time of the whole child process and its
CPU time (user + sys of the child and of the worker processes it waited for: the delta of
``resource.getrusage(RUSAGE_CHILDREN)`` around the run), the main measure on a shared
machine; the 1-minute load average (``uptime``) before and after. The ratio is ours /
PyMC's, of the medians. ``--profile``: our runs also time the phases of the call (imports,
model compilation split into vectorize_graph, our rewrites, the gradient, PyTensor's
rewrites and its linking, the first calls of the compiled functions where Numba generates
its code, the prior sampler, the Laplace fit, the annealing, the output), reusing
``benchmarks/profile_defaults.py``'s phase table, and count the compiled functions. A JSON
record goes to ``benchmarks/out/first_call.json`` (or ``--json``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CODE = REPO  # the checkout whose pymc_crais the runs import (--code)


def _model():
    import numpy as np
    import pymc as pm

    rng = np.random.default_rng(0)
    x = rng.normal(size=100)
    y = 1.0 + 0.5 * x + rng.normal(0.0, 0.8, size=100)
    with pm.Model() as model:
        intercept = pm.Normal("intercept", 0.0, 10.0)
        slope = pm.Normal("slope", 0.0, 2.0)
        sigma = pm.HalfNormal("sigma", 2.0)
        pm.Normal("y", intercept + slope * x, sigma, observed=y)
    return model


def _child(which: str, profile: bool) -> dict:
    """Runs in the fresh process: imports, model, one default call."""
    t0 = time.perf_counter()
    times: dict[str, float] = {}
    counts = {"compiled_functions": 0}
    if which == "pmc":
        import pymc_crais as pmc

        if profile:
            _instrument(times, counts)
    import pymc as pm

    t_import = time.perf_counter() - t0
    import warnings

    model = _model()
    s = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if which == "pmc":
            idata = pmc.sample_smc(model=model, random_seed=1, progressbar=False)
            log_z = float(pmc.log_marginal_likelihood(idata)[0])
        else:
            idata = pm.sample_smc(model=model, random_seed=1, progressbar=False)
            log_z = None
    call = time.perf_counter() - s
    post = idata["posterior"]
    rec = {
        "which": which,
        "import_s": t_import,
        "call_s": call,
        "log_z": log_z,
        "chains": int(post.sizes["chain"]),
        "draws": int(post.sizes["draw"]),
    }
    if profile and which == "pmc":
        rec["phases"] = dict(times)
        rec.update(counts)
    return rec


def _instrument(times: dict, counts: dict) -> None:
    """Wrap the functions of profile_defaults.py's phase table (and PyTensor's rewrite and
    link steps) with timers; count PyTensor's compiled functions."""
    import importlib

    from profile_defaults import LINKING, PHASES, REWRITES, timed_into

    def wrap(label, fn):
        return timed_into(times, label, fn)

    # profile_defaults' table, where its functions still live, and the annealing and output
    # of the current AnnealPlan (the same labels)
    extra = (
        ("chains (annealing)", "pymc_crais.samplers.engine.anneal_chain", "run_anneal_chains"),
        ("finish", "pymc_crais.samplers.engine.anneal_chain", "finish"),
    )
    for label, mod, attr in (*PHASES, *extra[:2]):
        m = importlib.import_module(mod)
        if hasattr(m, attr):
            setattr(m, attr, wrap(label, getattr(m, attr)))
    from pytensor.compile.maker import FunctionMaker

    FunctionMaker.prepare_fgraph = staticmethod(wrap(REWRITES, FunctionMaker.prepare_fgraph))
    create = FunctionMaker.create

    def counted_create(self, *a, **k):
        counts["compiled_functions"] += 1
        names = counts.setdefault("functions", [])
        names.append([str(o.variable) for o in self.outputs][:4])
        return create(self, *a, **k)

    FunctionMaker.create = wrap(LINKING, counted_create)
    # the first call of each compiled function (Numba's code generation is lazy in part)
    from pytensor.compile.executor import Function

    call = Function.__call__
    seen = set()

    def first_call(self, *a, **k):
        if id(self) in seen:
            return call(self, *a, **k)
        seen.add(id(self))
        s = time.perf_counter()
        try:
            return call(self, *a, **k)
        finally:
            label = "PyTensor first calls (JIT)"
            times[label] = times.get(label, 0.0) + time.perf_counter() - s

    Function.__call__ = first_call


def _run_one(which: str, profile: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="first_call_") as tmp:
        env = dict(os.environ)
        env["PYTENSOR_FLAGS"] = f"base_compiledir={tmp}/pytensor"
        env["NUMBA_CACHE_DIR"] = f"{tmp}/numba"
        env["PYTHONPATH"] = str(CODE) + os.pathsep + env.get("PYTHONPATH", "")
        cmd = [sys.executable, "-W", "ignore", __file__, "--_child", which]
        cmd += ["--profile"] * profile
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)  # fmt: skip
        out, err = proc.communicate()  # waits for (reaps) the child
        wall = time.perf_counter() - t0
        load1 = os.getloadavg()[0]
    return out, err, wall, load0, load1, proc


def _measure(which: str, profile: bool) -> dict:
    """One fresh process; CPU time from the rusage of the children this process reaped."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out, err, wall, load0, load1, proc = _run_one(which, profile)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    line = [ln for ln in out.splitlines() if ln.startswith("JSON")]
    if proc.returncode != 0 or not line:
        raise RuntimeError(f"{which} run failed:\n{err[-3000:]}")
    rec = json.loads(line[0][4:])
    rec["wall_s"] = wall
    rec["cpu_user_s"] = after.ru_utime - before.ru_utime
    rec["cpu_sys_s"] = after.ru_stime - before.ru_stime
    rec["cpu_s"] = rec["cpu_user_s"] + rec["cpu_sys_s"]
    rec["load1_before"], rec["load1_after"] = load0, load1
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2, help="runs of each sampler")
    ap.add_argument("--only", choices=("pmc", "pm"), default=None)
    ap.add_argument("--profile", action="store_true", help="phase split of our runs")
    ap.add_argument("--json", default=str(HERE / "out" / "first_call.json"))
    ap.add_argument("--label", default="", help="a note stored with the record")
    ap.add_argument("--code", default=str(REPO),
                    help="checkout whose pymc_crais is imported (e.g. main's, for a before/after)")
    ap.add_argument("--_child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._child:
        print("JSON" + json.dumps(_child(args._child, args.profile)), flush=True)
        return 0
    global CODE
    CODE = Path(args.code).resolve()
    order = [args.only] if args.only else ["pmc", "pm"]
    runs = []
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print("uptime:", uptime, flush=True)
    for i in range(args.repeat):
        for which in order if i % 2 == 0 else order[::-1]:
            rec = _measure(which, args.profile)
            runs.append(rec)
            print(f"{which:4s} cpu {rec['cpu_s']:6.1f} s (user {rec['cpu_user_s']:.1f}, sys "
                  f"{rec['cpu_sys_s']:.1f})  wall {rec['wall_s']:6.1f} s  (import "
                  f"{rec['import_s']:.1f} s, call {rec['call_s']:.1f} s)  load "
                  f"{rec['load1_before']:.1f}->{rec['load1_after']:.1f}", flush=True)  # fmt: skip
            if rec.get("phases"):
                print(f"     {rec['compiled_functions']} compiled functions")
                for label, v in sorted(rec["phases"].items(), key=lambda kv: -kv[1]):
                    print(f"     {label:36s}{v:8.2f} s")
    summary = {}
    for which in order:
        rs = [r for r in runs if r["which"] == which]
        summary[which] = {
            "cpu_s_median": statistics.median(r["cpu_s"] for r in rs),
            "wall_s_median": statistics.median(r["wall_s"] for r in rs),
            "n": len(rs),
        }
    if len(order) == 2:
        summary["ratio_cpu"] = summary["pmc"]["cpu_s_median"] / summary["pm"]["cpu_s_median"]
        summary["ratio_wall"] = summary["pmc"]["wall_s_median"] / summary["pm"]["wall_s_median"]
        print(f"median cpu: pmc {summary['pmc']['cpu_s_median']:.1f} s, pm "
              f"{summary['pm']['cpu_s_median']:.1f} s, ratio {summary['ratio_cpu']:.2f}; "
              f"median wall: pmc {summary['pmc']['wall_s_median']:.1f} s, pm "
              f"{summary['pm']['wall_s_median']:.1f} s, "
              f"ratio {summary['ratio_wall']:.2f}")  # fmt: skip
    record = {
        "command": " ".join(["python", "benchmarks/first_call.py", *(argv or sys.argv[1:])]),
        "label": args.label,
        "code": str(CODE),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "uptime": uptime,
        "cpu_count": os.cpu_count(),
        "runs": runs,
        "summary": summary,
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
