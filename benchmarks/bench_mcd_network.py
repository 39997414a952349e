"""MCD's score network: hand-written NumPy forward+backward against a compiled PyTensor graph
of the same network (outputs and all gradients, including the input VJP).

    python benchmarks/bench_mcd_network.py D HIDDEN      # e.g. 20 64, 200 128

64 particles, 2 residual blocks, one BLAS thread; prints the largest differences and the time
per forward+backward of each, twice. Results: docs/algorithms.md ("Network: NumPy or PyTensor").
"""

import sys
import time

import numpy as np
import pytensor
import pytensor.tensor as pt
from threadpoolctl import threadpool_limits

from pymc_crais.core.learned.mcd import ResidualScore

d, K, H, N = int(sys.argv[1]), 64, int(sys.argv[2]), 64
sc = ResidualScore(d, K, hidden=H, n_blocks=2)
rng = np.random.default_rng(0)
p = sc.init(rng)
p["W_out"] = rng.normal(0, 0.1, p["W_out"].shape)
x = rng.normal(size=(N, d))
cot = rng.normal(size=(N, d))
# PyTensor graph
sym = {k: pt.matrix(k) if v.ndim == 2 else pt.vector(k) for k, v in p.items()}
xs, cs, ks = pt.matrix("x"), pt.matrix("c"), pt.iscalar("k")
sw = lambda z: z * pt.sigmoid(z)
h = xs @ sym["W_in"] + sym["b_in"] + sym["E"][ks]
for j in range(2):
    z = sw(h) @ sym[f"W1_{j}"] + sym[f"b1_{j}"] + sym[f"T_{j}"][ks]
    h = h + sw(z) @ sym[f"W2_{j}"] + sym[f"b2_{j}"]
out = sw(h) @ sym["W_out"] + sym["b_out"]
J = pt.sum(out * cs)
names = list(p)
grads = pt.grad(J, [sym[k] for k in names] + [xs])
fn = pytensor.function([xs, cs, ks] + [sym[k] for k in names], [out] + grads)
fn.trust_input = True
args = [p[k] for k in names]


def run_pt():
    return fn(x, cot, np.array(3, dtype=np.int32), *args)


def run_np():
    acc = {k: np.zeros_like(v) for k, v in p.items()}
    o, cache = sc.forward(p, 3, x)
    gx = sc.backward(p, cache, cot, acc)
    return o, acc, gx


o1 = run_pt()
o2 = run_np()
print(
    "max diff out",
    np.abs(o1[0] - o2[0]).max(),
    "W_in",
    np.abs(o1[1 + names.index("W_in")] - o2[1]["W_in"]).max(),
    "x",
    np.abs(o1[-1] - o2[2]).max(),
)
with threadpool_limits(1):
    for name, f in (
        ("numpy", run_np),
        ("pytensor", run_pt),
        ("numpy", run_np),
        ("pytensor", run_pt),
    ):
        t = time.perf_counter()
        n = 0
        while time.perf_counter() - t < 3:
            f()
            n += 1
        print(
            f"d={d} H={H} N={N} {name}: {1e6 * (time.perf_counter() - t) / n:.0f} us per forward+backward"
        )
