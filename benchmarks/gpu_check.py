"""The GPU check: JAX on the CPU against JAX on the GPU, in one bounded run, one JSON file.

    benchmarks/gpu_check.sh [OUT.json] [--quick] [--budget-s 300] [--chains 2] ...
    python benchmarks/gpu_check.py --json OUT.json [same options]

Every part runs in a fresh interpreter through ``bench_bigdata.py``'s worker (so that its
peak resident memory is its own; BLAS and XLA's CPU code on one thread, as the samplers run),
each under the time that is left of ``--budget-s``; the JSON is rewritten after every part,
so a run stopped from outside keeps what it measured. With a GPU, the CPU call at the big
size comes last, after the run, so that a short budget cuts a CPU number, not a GPU one.

1. **devices**: what ``jax.devices()`` sees in a process left to JAX's choice of platform.
2. **throughput**: one batched log-density + gradient call through the model density the
   samplers use (``compile_model_density``, default ``memory_budget``: blocks of particles
   when the estimate exceeds 1 GiB), best of a few after warm-up, as particles a second, for
   a Pima-sized logistic regression (768 rows, d = 8) and one of ``--big-rows`` rows
   (d = 20), each with JAX on the CPU (``JAX_PLATFORMS=cpu``) and on the GPU; at the big size
   the GPU also gets one call without blocks (``memory_budget`` 64 GiB). Without a GPU the
   GPU rows say ``"no GPU"`` and hold no numbers.
3. **run**: ``pmc.sample_smc(backend="jax")`` on the big regression, defaults except
   ``chains`` (``--chains``, fixed so that machines compare) and the seed, on the device
   JAX picks (the GPU where there is one): ``log Z ± MCSE``, wall time, the process's peak
   RSS (``getrusage``: the whole process, the data and libraries included) against the
   default memory budget, and the device's peak memory (``memory_stats()``; ``null`` with the
   reason on a CPU).

``--quick`` shrinks every size (a test runs it in seconds on a CPU). Nothing is estimated:
a part that fails or runs out of time is recorded with its error.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_bigdata  # the worker and its fresh-interpreter runner

CPU_ENV = {"JAX_PLATFORMS": "cpu"}
# JAX's own choice (the GPU where there is one); no preallocation of 75 % of the GPU, so that
# memory_stats() and nvidia-smi show what the run holds
GPU_ENV = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
NO_GPU = "no GPU"

SIZES = {  # (rows, d, particles) of each part
    "full": {"pima": (768, 8, 4096), "big_particles": 256, "run_particles": 256},
    "quick": {"pima": (768, 8, 64), "big_particles": 16, "run_particles": 32},
}
UNBLOCKED_BUDGET = float(2**36)  # 64 GiB: no blocks for 256 particles × 10⁶ rows × 192 B

_PROBE = """
import json, jax
devs = jax.devices()
print(json.dumps({"jax": jax.__version__, "default_backend": jax.default_backend(),
                  "devices": [str(d) for d in devs],
                  "device_kind": [getattr(d, "device_kind", d.platform) for d in devs]}))
"""


def probe_devices(timeout: float) -> dict:
    """What ``jax.devices()`` sees with JAX left to choose its platform."""
    timeout = max(timeout, 0.5)
    env = {**os.environ, **GPU_ENV}
    try:
        out = subprocess.run([sys.executable, "-c", _PROBE], check=False, capture_output=True,
                             text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        err = f"jax.devices() did not answer in {timeout:.0f} s"
        return {"error": err, "gpu": False, "note": f"no GPU: {err}"}
    if out.returncode:
        err = (out.stderr.strip().splitlines() or ["failed"])[-1][:300]
        return {"error": err, "gpu": False, "note": f"no GPU: importing JAX failed ({err})"}
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    rec["gpu"] = rec["default_backend"] == "gpu"
    rec["note"] = (f"GPU: {rec['device_kind'][0]}" if rec["gpu"] else
                   f"no GPU: jax.devices() = {rec['devices']}; the GPU rows are unmeasured")
    return rec


class Budget:
    """Seconds left of the whole check; each part gets what is left, less a margin for the
    parts after it and for writing the JSON."""

    def __init__(self, seconds: float, margin: float = 10.0):
        self.end, self.margin = time.monotonic() + seconds - margin, margin

    def left(self) -> float:
        return self.end - time.monotonic()


def throughput(model: str, rows: int, dim: int, particles: int, backend: str, gpu: dict,
               budget: Budget, cap: float, memory_budget: float | None = None,
               repeats: int = 3) -> dict:
    """One throughput row (``backend`` is ``"cpu"`` or ``"gpu"``; ``gpu`` is the probe's
    record)."""
    row = {"model": model, "rows": rows, "dim": dim, "particles": particles,
           "backend": backend, "memory_budget": memory_budget}
    if backend == "gpu" and not gpu["gpu"]:
        return {**row, "status": NO_GPU, "error": gpu["note"]}
    timeout = min(cap, budget.left())
    if timeout < 5:
        return {**row, "status": "skipped", "error": "the time budget was spent"}
    spec = {"kind": "call", "rows": rows, "dim": dim, "particles": particles, "backend": "jax",
            "memory_budget": memory_budget, "repeats": repeats}
    rec = bench_bigdata.run_one(spec, timeout, env=CPU_ENV if backend == "cpu" else GPU_ENV)
    if "error" in rec:
        return {**row, "status": "error", "error": rec["error"]}
    if backend == "gpu" and rec["device"].startswith("cpu"):  # JAX fell back to the CPU
        return {**row, "status": "error", "error": f"ran on {rec['device']}, not a GPU"}
    keep = ("device", "block_rows", "call_s", "peak_rss_mb", "call_growth_mb",
            "device_peak_mb", "device_limit_mb", "device_memory_note", "process_s")
    return {**row, "status": "ok", "particles_per_s": particles / rec["call_s"],
            **{k: rec.get(k) for k in keep}}


def run_smc(rows: int, particles: int, chains: int, budget: Budget, gpu: dict) -> dict:
    """The whole ``pmc.sample_smc(backend="jax")`` run on JAX's default device (the CPU
    when ``gpu``, the probe's record, found none)."""
    spec = {"kind": "run", "rows": rows, "dim": 20, "particles": particles, "backend": "jax",
            "chains": chains, "memory_budget": None}
    timeout = budget.left()
    if timeout < 5:
        return {**spec, "status": "skipped", "error": "the time budget was spent"}
    # imported only for a run that happens: importing PyMC takes seconds on a loaded machine
    from pymc_crais.samplers.engine.memory import DEFAULT_MEMORY_BUDGET
    rec = bench_bigdata.run_one(spec, timeout, env=GPU_ENV)
    if "error" in rec:
        return {**rec, "status": "error"}
    rec["status"] = "ok" if gpu["gpu"] or not rec["device"].startswith("cpu") else (
        f"ok on the CPU ({gpu['note']})")
    rec["default_budget_mb"] = DEFAULT_MEMORY_BUDGET / 2**20
    rec["peak_rss_within_default_budget"] = rec["peak_rss_mb"] <= DEFAULT_MEMORY_BUDGET / 2**20
    return rec


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", default="benchmarks/out/gpu_check.json")
    p.add_argument("--quick", action="store_true", help="small sizes (a test, seconds)")
    p.add_argument("--budget-s", type=float, default=300.0, help="the whole check's time limit")
    p.add_argument("--big-rows", type=float, default=None,
                   help="rows of the big regression (default 1e6; 2e4 with --quick)")
    p.add_argument("--run-rows", type=float, default=None,
                   help="rows of the sample_smc run (default: --big-rows; 2e3 with --quick)")
    p.add_argument("--chains", type=int, default=2, help="chains of the sample_smc run")
    a = p.parse_args(argv)
    mode = "quick" if a.quick else "full"
    size = SIZES[mode]
    big = int(a.big_rows or (2e4 if a.quick else 1e6))
    run_rows = int(a.run_rows or (2e3 if a.quick else big))
    budget = Budget(a.budget_s, margin=3.0 if a.quick else 10.0)
    t0 = time.monotonic()
    out = {
        "check": "benchmarks/gpu_check.sh", "mode": mode, "budget_s": a.budget_s,
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"processor": platform.processor() or platform.machine(),
                    "cpus": os.cpu_count(), "load": os.getloadavg(),
                    "python": platform.python_version(),
                    "threads": "BLAS and XLA's CPU code on one thread (bench_bigdata.SINGLE_THREAD)"},
        "devices": None, "throughput": [], "run": None,
    }

    def save() -> None:
        out["elapsed_s"] = time.monotonic() - t0
        out["machine"]["load_now"] = os.getloadavg()  # other jobs during the check
        os.makedirs(os.path.dirname(a.json) or ".", exist_ok=True)
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=1)

    out["devices"] = devices = probe_devices(min(60.0, budget.left()))
    save()
    print(f"devices: {devices}", flush=True)
    rows_pima, dim_pima, n_pima = size["pima"]
    parts = [
        ("pima", rows_pima, dim_pima, n_pima, "cpu", None, 20),
        ("pima", rows_pima, dim_pima, n_pima, "gpu", None, 20),
        ("big", big, 20, size["big_particles"], "gpu", None, 3),
        ("big", big, 20, size["big_particles"], "gpu", UNBLOCKED_BUDGET, 3),
        ("big", big, 20, size["big_particles"], "cpu", None, 3),
        "run",
    ]
    if devices["gpu"]:  # the GPU's numbers first: the big CPU call after the run
        parts[-2], parts[-1] = parts[-1], parts[-2]
    else:  # the unblocked call is a GPU-only row
        parts = [q for q in parts if q == "run" or q[5] is None]
    for part in parts:
        if part == "run":
            out["run"] = rec = run_smc(run_rows, size["run_particles"], a.chains, budget,
                                       devices)
        else:
            model, rows, dim, n, backend, mb, repeats = part
            rec = throughput(model, rows, dim, n, backend, devices, budget, cap=90.0,
                             memory_budget=mb, repeats=repeats)
            out["throughput"].append(rec)
        save()
        print(json.dumps(rec), flush=True)
    return out


if __name__ == "__main__":
    main()
