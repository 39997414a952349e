"""L-BFGS iterations of the Laplace fit on every validation case (suite and applied tier).

    python benchmarks/laplace_iterations.py [--maxiter 2000] > benchmarks/out/laplace_iterations-s11.txt

For each case: the model's batched density is compiled and ``maximize_log_density`` (the
Laplace fit's L-BFGS) runs from the model's initial point with ``--maxiter``; the line gives
the iterations, evaluations, whether SciPy reports convergence, the seconds and the log-density
reached. ``init_auto.LAPLACE_MAXITER`` is set from it: a fit that converges does so in a few
hundred iterations at most, one that climbs a funnel's neck runs to the cap.
"""

from __future__ import annotations

import argparse
import time
import warnings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--maxiter", type=int, default=2000)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    from pymc_crais.core.initial import maximize_log_density
    from pymc_crais.samplers.engine.compile import (
        compile_model_density,
        initial_point_vector,
        parameter_layout,
    )
    from pymc_crais.validation import CASES, get_case

    for case in CASES:
        try:
            model = get_case(case).build().model
            density = compile_model_density(model)
            x0 = initial_point_vector(model, parameter_layout(model))
            t = time.perf_counter()
            res = maximize_log_density(density, x0, args.maxiter)
            dt = time.perf_counter() - t
            print(f"{case:36s} d={x0.size:4d} nit {res.nit:5d} nfev {res.nfev:5d} "
                  f"converged {bool(res.success)!s:5s} {dt:5.2f} s log p {-res.fun:.1f}", flush=True)  # fmt: skip
        except Exception as exc:  # noqa: BLE001 (a case that cannot compile is reported)
            print(f"{case:36s} error {type(exc).__name__}: {str(exc)[:80]}", flush=True)


if __name__ == "__main__":
    main()
