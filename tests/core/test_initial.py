"""The normalized initial distributions: densities and gradients against SciPy and finite
differences, on ill-conditioned scales too."""

import numpy as np
import pytest
from scipy import stats

from pymc_crais.core.initial import GaussianInitial, StudentTInitial


def _scale(d, cond, rng):
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return (q * np.geomspace(1.0, cond, d)) @ q.T


@pytest.mark.parametrize("d,cond", [(1, 1.0), (3, 10.0), (12, 1e6)])
@pytest.mark.parametrize("kind", ["gaussian", "student_t"])
def test_logpdf_and_gradient(kind, d, cond):
    rng = np.random.default_rng(d)
    mean = rng.standard_normal(d)
    cov = _scale(d, cond, rng)
    if kind == "gaussian":
        q0 = GaussianInitial(mean, cov)
        ref = stats.multivariate_normal(mean, cov)
    else:
        q0 = StudentTInitial(mean, cov, df=3.5)
        ref = stats.multivariate_t(mean, cov, df=3.5)
    x = q0.draw(rng, 40)
    lq, g = q0.logpdf_and_grad(x)
    np.testing.assert_allclose(lq, ref.logpdf(x), rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(lq, q0.logpdf(x))
    np.testing.assert_array_equal(g, q0.grad_logpdf(x))
    # central differences along random unit directions, on the scale of the distribution
    u = rng.standard_normal((40, d))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    h = 1e-5 * np.sqrt(np.diag(cov)).min()
    fd = (q0.logpdf(x + h * u) - q0.logpdf(x - h * u)) / (2 * h)
    np.testing.assert_allclose(np.sum(g * u, axis=1), fd, rtol=1e-4, atol=1e-4 * np.abs(g).max())


def test_far_points_give_finite_gradients_and_minus_inf_never_nan():
    q0 = StudentTInitial(np.zeros(2), np.eye(2), df=5.0)
    x = np.array([[1e200, 0.0], [0.0, 0.0]])  # z·z overflows
    with np.errstate(over="ignore", invalid="ignore"):
        lq, g = q0.logpdf_and_grad(x)
    assert lq[0] == -np.inf and lq[1] == q0.logpdf(x[1:])[0]
    assert np.isfinite(g).all()
