"""The moment-averaging path for general targets (core/ma_path.py)."""

import numpy as np
import pytest
from scipy import stats

from pymc_crais.core.anneal import anneal
from pymc_crais.core.density import FunctionDensity
from pymc_crais.core.kernels import make_kernel
from pymc_crais.core.ma_path import MomentAveragingPath
from pymc_crais.core.particles import ParticleState
from pymc_crais.core.paths import make_path
from pymc_crais.core.schedules.adaptive import ESSSchedule

D = 3


def _spd(rng, d=D):
    a = rng.normal(size=(d, d))
    return a @ a.T + 0.5 * np.eye(d)


@pytest.fixture
def setup():
    rng = np.random.default_rng(0)
    m0, m1 = rng.normal(size=D), 3.0 * rng.normal(size=D)
    s0, s1 = _spd(rng), _spd(rng)
    path = MomentAveragingPath(0.0, 0.7, m0, s0, m1, s1, breaks=(0.25, 0.6))
    x = rng.normal(size=(7, D)) * 2.0
    # a Student-t q0 and a skewed target, with their gradients
    q0 = stats.multivariate_t(np.zeros(D), np.eye(D), df=4)
    lq = q0.logpdf(x)
    glq = -(4 + D) * x / (4 + np.sum(x**2, axis=1))[:, None]
    lt = -0.5 * np.sum((x - 1.0) ** 2, axis=1) + np.sin(x[:, 0])
    glt = -(x - 1.0) + np.c_[np.cos(x[:, 0]), np.zeros((7, D - 1))]
    state = ParticleState(x, lq, lt - lq, glq, glt - glq)
    return path, state, (m0, s0, m1, s1), (lq, lt)


@pytest.mark.parametrize("s", [0.0, 0.2, 0.5, 1.0])
def test_intermediate_gaussians_are_the_moment_averages(setup, s):
    path, state, (m0, s0, m1, s1), _ = setup
    ms = (1 - s) * m0 + s * m1
    ss = (1 - s) * s0 + s * s1 + s * (1 - s) * np.outer(m1 - m0, m1 - m0)
    np.testing.assert_allclose(path.gaussian(s, state.x), stats.multivariate_normal(ms, ss).logpdf(state.x), rtol=1e-10)


def test_endpoints_breaks_and_legs(setup):
    path, state, (m0, s0, m1, s1), (lq, lt) = setup
    g0 = stats.multivariate_normal(m0, s0).logpdf(state.x)
    g1 = stats.multivariate_normal(m1, s1).logpdf(state.x)
    np.testing.assert_array_equal(path.state_log_density(0.0, state), lq)
    np.testing.assert_allclose(path.state_log_density(1.0, state), lt - 0.7, rtol=1e-12)
    np.testing.assert_allclose(path.state_log_density(0.25, state), g0, rtol=1e-10)
    np.testing.assert_allclose(path.state_log_density(0.6, state), g1, rtol=1e-10)
    np.testing.assert_allclose(path.state_log_density(0.1, state), 0.6 * lq + 0.4 * g0, rtol=1e-10)
    np.testing.assert_allclose(path.state_log_density(0.8, state), 0.5 * g1 + 0.5 * (lt - 0.7), rtol=1e-10)
    # continuous across the breaks, and the increments telescope
    for b in (0.25, 0.6):
        np.testing.assert_allclose(
            path.state_log_density(b - 1e-9, state), path.state_log_density(b + 1e-9, state), atol=1e-6
        )
    taus = [0.0, 0.1, 0.25, 0.4, 0.6, 0.9, 1.0]
    total = sum(path.state_log_increment(a, b, state) for a, b in zip(taus[:-1], taus[1:], strict=True))
    np.testing.assert_allclose(total, lt - 0.7 - lq, rtol=1e-10)


@pytest.mark.parametrize("tau", [0.0, 0.1, 0.25, 0.4, 0.6, 0.8, 1.0])
def test_gradient_matches_finite_differences(setup, tau):
    path, state, _, _ = setup
    x, h = state.x, 1e-6
    # the state's gradients are exact for the density it caches; differentiate the path
    # with the same q0 / target functions
    q0 = stats.multivariate_t(np.zeros(D), np.eye(D), df=4)

    def log_gamma(y):
        lq = q0.logpdf(y)
        lt = -0.5 * np.sum((y - 1.0) ** 2, axis=1) + np.sin(y[:, 0])
        return path.state_log_density(tau, ParticleState(y, lq, lt - lq))

    fd = np.stack([(log_gamma(x + h * e) - log_gamma(x - h * e)) / (2 * h) for e in np.eye(D)], axis=1)
    np.testing.assert_allclose(path.state_grad_log_density(tau, state), fd, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state.grad_log_density(path, tau), fd, rtol=1e-5, atol=1e-6)


def test_outside_the_support_and_errors(setup):
    path, state, _, _ = setup
    dead = ParticleState(state.x, state.log_q0, np.full(state.n, -np.inf))
    assert np.all(np.isfinite(path.state_log_increment(0.0, 0.6, dead)))
    assert np.all(path.state_log_increment(0.6, 0.7, dead) == -np.inf)
    assert not np.any(np.isnan(path.state_log_density(1.0, dead)))
    with pytest.raises(TypeError, match="positions"):
        path.log_increment(0.0, 0.5, state.delta)
    with pytest.raises(ValueError, match="breaks"):
        MomentAveragingPath(0.0, 0.0, np.zeros(2), np.eye(2), np.ones(2), np.eye(2), breaks=(0.5, 0.4))
    with pytest.raises(ValueError, match="positive definite"):
        MomentAveragingPath(0.0, 0.0, np.zeros(2), np.eye(2), np.ones(2), -np.eye(2))
    with pytest.raises(ValueError, match="alpha"):
        MomentAveragingPath(0.5, 0.0, np.zeros(2), np.eye(2), np.ones(2), np.eye(2))


def test_other_paths_unchanged_through_the_state_methods(setup):
    _, state, _, _ = setup
    for path in (make_path(0.0, 0.3), make_path(0.5, 0.3)):
        np.testing.assert_array_equal(path.state_log_increment(0.2, 0.7, state), path.log_increment(0.2, 0.7, state.delta))
        np.testing.assert_array_equal(path.state_log_density(0.2, state), path.log_density(0.2, state.log_q0, state.delta))


def _gaussian_problem(d=2):
    """q0 = N(0, 3² I), target = Z · N(m, S) with far-off, correlated m, S: exact log Z."""
    m = np.array([4.0, -3.0])[:d]
    s = np.array([[0.3, 0.25], [0.25, 0.3]])[:d, :d]
    prec, log_z = np.linalg.inv(s), 2.5
    tgt = stats.multivariate_normal(m, s)
    dens = FunctionDensity(
        d,
        lambda x: -0.5 * np.sum(x**2, axis=1) / 9.0 - d * np.log(3.0) - 0.5 * d * np.log(2 * np.pi),
        lambda x: tgt.logpdf(x) + log_z,
        lambda x: -x / 9.0,
        lambda x: -(x - m) @ prec,
    )
    return dens, m, s, log_z


def test_exact_evidence_within_mcse():
    """SMC (ESS rule) along the MA path: replicate runs' mean
    log Ẑ within 4 standard errors (+ the replicate spread's own O(1/R) slack) of the
    truth; the standard error is small enough that a 0.1-nat error would fail."""
    dens, m, s, log_z = _gaussian_problem()
    rng = np.random.default_rng(5)
    # G0 from exact q0 draws, G1 slightly off the target (as a Laplace fit of a
    # non-Gaussian posterior would be)
    x = rng.normal(size=(4000, 2)) * 3.0
    path = MomentAveragingPath(0.0, 0.0, x.mean(0), np.cov(x, rowvar=False), m + 0.1, 1.3 * s)
    ests = []
    for _ in range(8):
        x0 = rng.normal(size=(800, 2)) * 3.0
        kw = dict(resample="always", tune_from_weights=True, n_mcmc_steps=3)
        res = anneal(rng, dens, x0, path, ESSSchedule(0.5), make_kernel("hmc"), **kw)
        ests.append(res.log_marginal_likelihood)
    ests = np.array(ests)
    se = ests.std(ddof=1) / np.sqrt(ests.size)
    assert se < 0.03, ests
    assert abs(ests.mean() - log_z) < 4 * se + 0.01, (ests.mean(), log_z, se)
