"""The shrunk covariance of the annealed start's Student-t fit (core/refit.shrunk_covariance)."""

import numpy as np
import pytest

from pymc_crais.core.refit import shrunk_covariance, student_t_from_draws


def _corr(cov):
    sd = np.sqrt(np.diag(cov))
    return cov / np.outer(sd, sd)


def test_independent_coordinates_are_shrunk_almost_to_no_correlation():
    rng = np.random.default_rng(0)
    scales = np.geomspace(0.01, 100.0, 40)
    x = rng.standard_normal((300, 40)) * scales
    cov, s = shrunk_covariance(x)
    assert s > 0.8  # the sample correlations are noise only
    np.testing.assert_allclose(np.diag(cov), x.var(axis=0, ddof=1))  # variances kept
    off = ~np.eye(40, dtype=bool)
    assert np.abs(_corr(cov)[off]).max() < 0.2 * np.abs(np.corrcoef(x, rowvar=False)[off]).max()


def test_strong_correlations_with_many_draws_are_kept():
    rng = np.random.default_rng(1)
    true = np.full((5, 5), 0.9) + 0.1 * np.eye(5)
    x = rng.multivariate_normal(np.zeros(5), true, size=5000)
    cov, s = shrunk_covariance(x)
    assert s < 0.01
    np.testing.assert_allclose(cov, np.cov(x, rowvar=False), rtol=0.02)


def test_with_few_draws_per_dimension_the_shrunk_correlations_are_closer_to_the_truth():
    """Ledoit-Wolf's point: with 1,000 draws in 60 dimensions (the annealed start's pilot on
    a 62-d hierarchical model) the shrunk estimate's error is below the sample one's, at
    every one of several seeds."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((60, 60)) * 0.15 + np.eye(60)
    true = _corr(a @ a.T)
    for seed in range(5):
        x = np.random.default_rng(seed).multivariate_normal(np.zeros(60), true, size=1000)
        cov, s = shrunk_covariance(x)
        assert 0.0 < s < 1.0
        sample = np.linalg.norm(np.corrcoef(x, rowvar=False) - true)
        assert np.linalg.norm(_corr(cov) - true) < sample


def test_the_intensity_is_the_off_diagonal_noise_over_the_off_diagonal_spread():
    """Against the definition, computed entry by entry: the sampling variance of the
    off-diagonal correlations (the only entries the target changes) over their spread."""
    rng = np.random.default_rng(6)
    x = rng.standard_t(3, size=(400, 4)) @ (np.eye(4) + 0.4 * rng.standard_normal((4, 4))).T
    _, s = shrunk_covariance(x)
    n, off = x.shape[0], ~np.eye(4, dtype=bool)
    z = (x - x.mean(axis=0)) / x.std(axis=0)
    r = z.T @ z / n
    noise = sum(((np.outer(row, row) - r) ** 2)[off].sum() for row in z) / n**2
    assert s == pytest.approx(min(1.0, noise / (r[off] ** 2).sum()), rel=1e-10)
    assert 0.0 < s < 0.5


def test_fewer_draws_than_dimensions_still_give_a_positive_definite_matrix():
    x = np.random.default_rng(3).standard_normal((20, 50))
    cov, s = shrunk_covariance(x)
    assert s > 0 and np.linalg.eigvalsh(cov).min() > 0
    assert student_t_from_draws(x, shrink=True) is not None  # the sample covariance: singular
    assert student_t_from_draws(x) is None


@pytest.mark.parametrize("constant", [2.0, 0.1])  # 0.1's mean is not exact: sd ~1e-17
def test_a_constant_coordinate_is_refused(constant):
    x = np.random.default_rng(4).standard_normal((100, 3))
    x[:, 1] = constant
    with pytest.raises(ValueError, match="every coordinate varying"):
        shrunk_covariance(x)
    assert student_t_from_draws(x, shrink=True) is None


def test_too_few_or_non_finite_draws_are_refused():
    x = np.random.default_rng(7).standard_normal((10, 3))
    for bad in (x[:2], np.where(np.arange(30).reshape(10, 3) == 4, np.nan, x)):
        with pytest.raises(ValueError, match="at least 3 finite rows"):
            shrunk_covariance(bad)
        assert student_t_from_draws(bad, shrink=True) is None


def test_the_student_t_uses_the_shrunk_covariance():
    x = np.random.default_rng(5).standard_normal((200, 10))
    q = student_t_from_draws(x, scale=1.5, df=4.0, shrink=True)
    cov, _ = shrunk_covariance(x)
    np.testing.assert_allclose(q.cov, cov * 1.5**2)
    np.testing.assert_allclose(q.mean, x.mean(axis=0))
