"""Wall time of one Sonar CR-AIS chain with one BLAS thread against the default pool.

    python benchmarks/bench_blas_threads.py [--draws 500] [--n-steps 100] [--repeats 2]

The samplers limit BLAS to one thread themselves (``single_threaded_blas``); this script
calls the undecorated sampler (``sample_crais.__wrapped__``) inside ``threadpool_limits(1)``
and with the default pool, alternately.
"""

from __future__ import annotations

import argparse
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--n-steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    from threadpoolctl import threadpool_info, threadpool_limits

    import pymc_crais as pmc
    from pymc_crais.datasets import load_sonar
    from pymc_crais.models import logistic_regression

    data = load_sonar()
    model = logistic_regression(data.X, data.y, prior_sd=1.0)
    inner = pmc.sample_crais.__wrapped__  # the sampler without its one-thread limit
    settings = dict(model=model, draws=args.draws, n_steps=args.n_steps, init="laplace", chains=1,
                    cores=1, random_seed=2026, progressbar=False)
    inner(**{**settings, "draws": 100, "n_steps": 20})  # compile and warm the caches
    pools = ", ".join(f"{p['internal_api']}: {p['num_threads']} threads" for p in threadpool_info())
    print(f"BLAS pools: {pools}")
    for _ in range(args.repeats):
        for limit in (1, None):
            t = time.perf_counter()
            with threadpool_limits(limits=limit):
                idata = inner(**settings)
            label = "1 thread" if limit == 1 else "default pool"
            print(f"{label:>13}: wall {time.perf_counter() - t:6.1f} s, sampling "
                  f"{idata.sample_stats.attrs['sampling_time']:5.1f} s", flush=True)


if __name__ == "__main__":
    main()
