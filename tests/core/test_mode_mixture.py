"""The mode-mixture start (core/mode_mixture.py): a normalized mixture of Student-ts with
exact draws and the right gradient, and its component weights."""

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import logsumexp

from pymc_crais.core.initial import StudentTInitial
from pymc_crais.core.mode_mixture import StudentTMixture, mode_weights


def _mixture(dim=1, weights=(0.7, 0.3)):
    comps = (
        StudentTInitial(np.full(dim, -2.0), np.eye(dim) * 0.25, df=5.0),
        StudentTInitial(np.full(dim, 3.0), np.eye(dim) * 0.81, df=3.0),
    )
    return StudentTMixture(comps, np.array(weights))


def test_normalized_and_the_weighted_sum_of_its_components():
    q = _mixture()
    def dens(v):
        return float(np.exp(q.logpdf(np.array([[v]]))[0]))

    total = sum(integrate.quad(dens, a, b, limit=400)[0] for a, b in ((-np.inf, -2.0), (-2.0, 3.0), (3.0, np.inf)))
    assert total == pytest.approx(1.0, abs=1e-7)
    x = np.linspace(-6, 7, 9)[:, None]
    want = np.log(0.7 * stats.t(5, -2.0, 0.5).pdf(x[:, 0]) + 0.3 * stats.t(3, 3.0, 0.9).pdf(x[:, 0]))
    np.testing.assert_allclose(q.logpdf(x), want, rtol=1e-12)


def test_gradient_matches_finite_differences():
    q = _mixture(dim=2)
    x = np.random.default_rng(0).normal(0.5, 3.0, size=(7, 2))
    lq, g = q.logpdf_and_grad(x)
    np.testing.assert_allclose(lq, q.logpdf(x))
    h = 1e-6
    for j in range(2):
        e = np.zeros(2)
        e[j] = h
        fd = (q.logpdf(x + e) - q.logpdf(x - e)) / (2 * h)
        np.testing.assert_allclose(g[:, j], fd, rtol=1e-5, atol=1e-7)


def test_gradient_far_out_in_a_tail_stays_finite():
    q = _mixture(dim=2)
    x = np.array([[1e100, -1e100], [0.0, 1e100]])
    lq, g = q.logpdf_and_grad(x)
    assert np.all(np.isfinite(lq)) and np.all(np.isfinite(g))
    with np.errstate(over="ignore"):  # beyond float64's squares: zero density, zero gradient
        lq, g = q.logpdf_and_grad(np.array([[0.0, 1e200]]))
    assert lq[0] == -np.inf and np.all(g == 0.0)


def test_draws_are_exact_and_from_their_generator_only():
    q = _mixture()
    x = q.draw(np.random.default_rng(3), 40_000)
    assert x.shape == (40_000, 1)
    # the share in the first component's region and a KS test against the mixture's CDF
    assert np.mean(x[:, 0] < 0.5) == pytest.approx(0.7, abs=0.01)

    def cdf(v):
        return 0.7 * stats.t(5, -2.0, 0.5).cdf(v) + 0.3 * stats.t(3, 3.0, 0.9).cdf(v)

    assert stats.kstest(x[:, 0], cdf).pvalue > 0.01
    np.testing.assert_array_equal(q.draw(np.random.default_rng(3), 50), q.draw(np.random.default_rng(3), 50))
    assert q.draw(np.random.default_rng(3), 0).shape == (0, 1)


def test_mode_weights_half_mass_half_uniform():
    w = mode_weights([0.0, np.log(3.0)])
    np.testing.assert_allclose(w, [0.5 * 0.25 + 0.25, 0.5 * 0.75 + 0.25])
    # a mode of negligible Laplace mass keeps a uniform floor of 1/(2K)
    w = mode_weights([0.0, -500.0, np.nan])
    assert w.sum() == pytest.approx(1.0) and w.min() == pytest.approx(1 / 6)
    np.testing.assert_allclose(mode_weights([np.nan, -np.inf]), [0.5, 0.5])
    with pytest.raises(ValueError, match="no modes"):
        mode_weights([])


def test_argument_checks():
    t = StudentTInitial(np.zeros(2), np.eye(2))
    with pytest.raises(ValueError, match="at least one"):
        StudentTMixture((), np.array([]))
    with pytest.raises(TypeError, match="StudentTInitial"):
        StudentTMixture((t, "x"), np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match="dimensions"):
        StudentTMixture((t, StudentTInitial(np.zeros(3), np.eye(3))), np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match="positive"):
        StudentTMixture((t, t), np.array([1.0, 0.0]))
    q = StudentTMixture((t, t), np.array([2.0, 2.0]))
    np.testing.assert_allclose(q.weights, [0.5, 0.5])
    np.testing.assert_allclose(q.logpdf(np.zeros((1, 2))), t.logpdf(np.zeros((1, 2))))
    assert logsumexp(np.log(q.weights)) == pytest.approx(0.0)
