"""Same seed, same bits, whatever PyTensor's compile cache holds.

PyTensor's Numba backend caches compiled kernels on disk (``<base_compiledir>/numba``). With
Numba's fast-math flags a kernel compiled in the process and the same kernel loaded from that
cache could round differently, so a seeded run gave different bits with a cold and a warm
cache (see :func:`pymc_crais.samplers.engine.compile.reproducible_compile`). These tests run a seeded
sampler in two fresh processes sharing a private, initially empty cache directory: the first
compiles everything, the second loads it, and both must agree bit for bit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A normal model with a HalfNormal scale (a log transform and a reduction over the data):
# the configuration whose log Z differed in the last bits between a cold and a warm cache.
CHILD = r"""
import hashlib, json, sys, warnings
import numpy as np
import pymc as pm
import pymc_crais as pmc

from pymc_crais.samplers.engine import staged

warnings.simplefilter("ignore")
staged.NUMPY_SECONDS = staged.SETUP_NUMPY_SECONDS = 0.005  # switch to Numba within each chain
y = np.random.default_rng(0).normal(1.0, 1.0, size=20)
with pm.Model() as model:
    mu = pm.Normal("mu", 0.0, 2.0)
    sd = pm.HalfNormal("sd", 2.0)
    pm.Normal("y", mu, sd, observed=y)
out = {}
init = sys.argv[2]
for kernel in sys.argv[1].split(","):
    idata = pmc.sample_ais(model=model, kernel=kernel, draws=200, n_steps=20, chains=2, cores=1,
                           random_seed=11, progressbar=False, init=init)
    post = idata["posterior"]
    h = hashlib.sha256()
    for name in sorted(post.data_vars):
        h.update(np.ascontiguousarray(post[name].values).tobytes())
    lml = idata["sample_stats"]["log_marginal_likelihood"].values
    out[kernel] = {"log_z": [float(v).hex() for v in lml], "posterior": h.hexdigest()}
print("RESULT " + json.dumps(out))
"""


def _run(cache_dir: Path, kernels: str, init: str = "auto") -> dict:
    env = dict(os.environ)
    flags = [f for f in env.get("PYTENSOR_FLAGS", "").split(",") if f and "compiledir" not in f]
    env["PYTENSOR_FLAGS"] = ",".join([*flags, f"base_compiledir={cache_dir}"])
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, kernels, init], check=False, capture_output=True, text=True, timeout=300,
        env=env, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def _cached_kernels(cache_dir: Path) -> int:
    return len(list((cache_dir / "numba").glob("*.nbi")))


def test_cold_and_warm_compile_cache_give_identical_bits(tmp_path):
    """From the prior with random-walk moves: the model's density and prior draws are
    compiled, not the gradient, the Laplace fit and the mode search (half the cold
    compilation of this test's two processes). The slow test below runs the default start
    and the gradient kernels."""
    cold = _run(tmp_path, "rwmh", init="prior")
    assert _cached_kernels(tmp_path) > 0  # the first process did fill the cache
    warm = _run(tmp_path, "rwmh", init="prior")
    assert warm == cold


@pytest.mark.slow
def test_cold_and_warm_cache_identical_for_gradient_kernels(tmp_path):
    kernels = "hmc,mala,rwmh"
    cold = _run(tmp_path, kernels)
    warm = _run(tmp_path, kernels)
    assert warm == cold
