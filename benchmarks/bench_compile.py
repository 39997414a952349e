"""First-compilation cost of the demo's models, with an empty (cold) or a filled (warm) cache.

Each model is compiled as the samplers compile it for a gradient kernel or init="laplace"
(``compile_model_density(model, gradient=True)``) and called once (Numba compiles on the first
call); wall and CPU seconds per model, in the demo's order. Run it twice with the same private
cache directory, the first time empty:

    PYTENSOR_FLAGS=base_compiledir=/tmp/cold python benchmarks/bench_compile.py   # cold
    PYTENSOR_FLAGS=base_compiledir=/tmp/cold python benchmarks/bench_compile.py   # warm
"""

from __future__ import annotations

import time

import numpy as np


def main() -> int:
    from pymc_crais.cli import PIMA_DROPPED, _linear_regression_case
    from pymc_crais.datasets import load_pima, load_sonar
    from pymc_crais.models import logistic_regression
    from pymc_crais.samplers.engine.compile import compile_model_density, resolve_compile_kwargs

    pima, sonar = load_pima(), load_sonar()
    keep = [i for i, f in enumerate(pima.feature_names) if f not in PIMA_DROPPED]
    models = {
        "conjugate check": lambda: _linear_regression_case()[0],
        "Pima full": lambda: logistic_regression(pima.X, pima.y, prior_sd=5.0),
        "Pima reduced": lambda: logistic_regression(pima.X[:, keep], pima.y, prior_sd=5.0),
        "Sonar sd 5": lambda: logistic_regression(sonar.X, sonar.y, prior_sd=5.0),
        "Sonar sd 1": lambda: logistic_regression(sonar.X, sonar.y, prior_sd=1.0),
    }
    total_wall = total_cpu = 0.0
    for name, build in models.items():
        model = build()
        t0, c0 = time.perf_counter(), time.process_time()
        density = compile_model_density(model, gradient=True, compile_kwargs=resolve_compile_kwargs(None, None))
        density.evaluate(np.zeros((2, density.dim)), gradient=True)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        total_wall, total_cpu = total_wall + wall, total_cpu + cpu
        print(f"{name:<16} wall {wall:6.1f} s   cpu {cpu:6.1f} s", flush=True)
    print(f"{'all':<16} wall {total_wall:6.1f} s   cpu {total_cpu:6.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
