import numpy as np
import pytest
from threadpoolctl import threadpool_limits


@pytest.fixture(scope="session", autouse=True)
def _one_blas_thread():
    """The tests run with BLAS limited to one thread, as every sampler runs
    (``pymc_crais.samplers.engine.runner.single_threaded_blas``).

    Many tests call the NumPy core or SciPy directly on small arrays (a Cholesky factor of a
    3 × 3 covariance, a triangular solve per half-population); with the default thread pool
    each such call pays the threads' synchronisation. On a loaded 2-core machine a 3 × 3
    ``solve_triangular`` took 4 ms instead of microseconds, and the IMH invariance test
    14 s instead of 0.4 s (60 replicates). No test compares bits with a run made under
    another thread count. A test that needs other limits sets them inside itself.
    """
    with threadpool_limits(limits=1):
        yield


@pytest.fixture
def rng():
    return np.random.default_rng(20261122)
