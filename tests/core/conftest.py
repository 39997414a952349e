"""The NumPy core's tests run with BLAS limited to one thread, as every sampler runs the core
(``pymc_crais.samplers.runner.single_threaded_blas``).

The core works on many small arrays (a Cholesky factor of a 3 × 3 covariance, a triangular
solve per half-population); with the default thread pool each such call pays the threads'
synchronisation. On a loaded 2-core machine a 3 × 3 ``solve_triangular`` took 4 ms instead
of microseconds, and the IMH invariance test 14 s instead of 0.4 s (60 replicates). The
limit changes no test's arithmetic beyond BLAS rounding, and no test here compares bits
with a run made under another thread count.
"""

import pytest
from threadpoolctl import threadpool_limits


@pytest.fixture(scope="package", autouse=True)
def _one_blas_thread():
    with threadpool_limits(limits=1):
        yield
