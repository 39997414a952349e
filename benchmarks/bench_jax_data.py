"""JAX: resident memory the compiled model density keeps, with and without the data as inputs.

    python benchmarks/bench_jax_data.py [--rows 1e5,1e6] [--sizes 1,2,3,4,5,6,1]
        [--json benchmarks/out/bigdata_jax_data.json]

For each row count, each way of giving the design matrix (``pm.Data``, or a NumPy array in the
graph: a constant) and each compilation (``inputs``: the package's, the data as inputs of the
compiled functions, ``pymc_crais/samplers/engine/jax_data.py``; ``constants``: the data left where
PyMC puts them, which is what PyTensor's JAX linker did before), a fresh interpreter builds the
logistic regression (d = 20), compiles its batched log-density + gradient with JAX (the
compilation calls it once, on 2 particles) and evaluates it once at every batch size of
``--sizes`` (every new size is a new shape XLA compiles). After each step it waits 0.3 s (XLA
frees a call's buffers shortly after its outputs are ready), returns freed memory to the
system (``malloc_trim``) and records the resident set; it also records the
process's peak. Then it compiles (without running) 20 more batch shapes and reports the
resident memory each executable keeps. One XLA thread, one BLAS thread.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

SINGLE_THREAD = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
}


def worker(spec: dict) -> dict:
    """One measurement in this (fresh) process."""
    import ctypes
    import resource
    import time

    import numpy as np

    libc = ctypes.CDLL("libc.so.6")

    def rss_mb() -> float:
        time.sleep(0.3)  # XLA frees a call's buffers shortly after its outputs are ready
        libc.malloc_trim(0)
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    import jax.numpy as jnp
    import pymc as pm

    import pymc_crais.samplers.engine.compile as compile_mod
    import pymc_crais.samplers.engine.model_graph as graph_mod
    from pymc_crais.samplers.engine.jax_data import DataCompiler

    if spec["compile"] == "constants":  # the data left as PyMC put them (the old path)

        class Unlifted(DataCompiler):
            def __init__(self, compile_kwargs, jax):
                super().__init__(compile_kwargs, jax=False)

        graph_mod.DataCompiler = Unlifted
    jnp.zeros(1).block_until_ready()  # the XLA runtime, before anything is measured
    rec = dict(spec, rss_runtime_mb=rss_mb())
    n, d = int(spec["rows"]), 20
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d))
    y = (rng.random(n) < 1 / (1 + np.exp(-(X @ rng.normal(0, 0.5, d))))).astype(np.int64)
    with pm.Model() as model:
        Xd = pm.Data("X", X) if spec["data"] == "pm.Data" else X
        beta = pm.Normal("beta", 0, 1, shape=d)
        pm.Bernoulli("y", logit_p=Xd @ beta, observed=y)
    del X, Xd
    rec["rss_model_mb"] = rss_mb()
    ckw = compile_mod.resolve_compile_kwargs("jax", None)
    dens = compile_mod.compile_model_density(model, gradient=True, compile_kwargs=ckw)
    rec["rss_compiled_mb"] = rss_mb()
    rec["rss_after_size_mb"] = []
    for size in spec["sizes"]:
        dens.evaluate(rng.standard_normal((size, d)) * 0.1, gradient=True)
        rec["rss_after_size_mb"].append(rss_mb())
    rec["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # what each executable keeps: 20 more batch shapes compiled (not run) through the jitted
    # function PyTensor's thunk calls (its first default argument)
    fn = dens._fn_grad
    inner = getattr(fn, "function", fn)._function
    jitted = inner.vm.__defaults__[0]
    if hasattr(fn, "data"):
        data = fn.data.values(fn.sources)
    else:  # the old path: the shared variables are the function's inputs after the particles
        data = [c.storage[0] for c in inner.input_storage[1:]]
    before, keep = rss_mb(), []
    for size in range(100, 120):
        keep.append(jitted.lower(np.zeros((size, d)), *data).compile())
    rec["mib_per_executable"] = (rss_mb() - before) / len(keep)
    return rec


def main(argv=None) -> list:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--rows", default="1e5,1e6")
    p.add_argument("--sizes", default="1,2,3,4,5,6,1")
    p.add_argument("--json", default="benchmarks/out/bigdata_jax_data.json")
    a = p.parse_args(argv)
    if a.worker:
        print(json.dumps(worker(json.loads(a.worker))))
        return []
    sizes = [int(s) for s in a.sizes.split(",")]
    records = []
    print(
        "| rows | data | compiled with | after compile (MiB) | after each size (MiB) | peak (MiB) | MiB per executable |"
    )
    print("|---|---|---|---|---|---|---|")
    for rows in [int(float(r)) for r in a.rows.split(",")]:
        for data in ("pm.Data", "NumPy constant"):
            for compile_ in ("constants", "inputs"):
                spec = {"rows": rows, "data": data, "compile": compile_, "sizes": sizes}
                cmd = [sys.executable, __file__, "--worker", json.dumps(spec)]
                out = subprocess.run(
                    cmd, capture_output=True, text=True, env={**os.environ, **SINGLE_THREAD}
                )
                if out.returncode:
                    rec = {**spec, "error": out.stderr.strip().splitlines()[-1][:200]}
                    print(f"| {rows:,} | {data} | {compile_} | {rec['error']} | | |", flush=True)
                else:
                    rec = json.loads(out.stdout.strip().splitlines()[-1])
                    steps = ", ".join(f"{v:.0f}" for v in rec["rss_after_size_mb"])
                    print(
                        f"| {rows:,} | {data} | {compile_} | {rec['rss_compiled_mb']:.0f} | "
                        f"{steps} | {rec['peak_rss_mb']:.0f} | {rec['mib_per_executable']:.1f} |",
                        flush=True,
                    )
                records.append(rec)
    if a.json:
        os.makedirs(os.path.dirname(a.json) or ".", exist_ok=True)
        with open(a.json, "w") as fh:
            json.dump({"load": os.getloadavg(), "records": records}, fh, indent=1)
    return records


if __name__ == "__main__":
    main()
