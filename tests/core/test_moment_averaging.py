"""Geometric and moment-averaging paths between Gaussians, and thermodynamic-length schedules
(seed 004): the study in ``benchmarks/studies/moment_averaging.py`` (no sampler uses it).
Exact references: closed-form Gaussian moments, quadrature on a grid, brute force. The
package's thermodynamic schedules alone: tests/core/test_thermodynamic.py."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import logsumexp

from benchmarks.studies.moment_averaging import (
    Gaussian,
    GeometricGaussianPath,
    MomentAveragingGaussianPath,
    ais_log_weights,
    binned_allocation,
    binned_schedule,
    expected_log_weight,
    kl_divergence,
    log_mean_exp,
    log_weight_variance,
    make_gaussian_path,
    optimal_binned_schedule,
    segment_costs,
    thermodynamic_length,
)
from pymc_crais.core.schedules.thermodynamic import fisher_metric, thermodynamic_schedule

PATHS = [GeometricGaussianPath, MomentAveragingGaussianPath]


def _random_pair(seed=3, d=2, shift=3.0):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(d, d)), rng.normal(size=(d, d))
    p0 = Gaussian(rng.normal(size=d), a @ a.T + 0.3 * np.eye(d), log_z=0.4)
    p1 = Gaussian(shift * rng.normal(size=d), b @ b.T + 0.3 * np.eye(d), log_z=-1.7)
    return p0, p1


def _paper_pair():
    rho = 0.85
    p0 = Gaussian(np.array([-10.0, 0.0]), np.array([[1.0, -rho], [-rho, 1.0]]))
    p1 = Gaussian(np.array([10.0, 0.0]), np.array([[1.0, rho], [rho, 1.0]]))
    return p0, p1


def _grid_log_z(g: Gaussian, half_width=12.0, n=801) -> float:
    """log ∫ f by the trapezoid rule on a 2-D grid around the mean (independent of A(η))."""
    sd = np.sqrt(np.diag(g.cov))
    axes = [np.linspace(m - half_width * s, m + half_width * s, n) for m, s in zip(g.mean, sd)]
    xx, yy = np.meshgrid(*axes, indexing="ij")
    lf = g.log_density(np.column_stack([xx.ravel(), yy.ravel()])).reshape(xx.shape)
    w = np.ones(n)
    w[[0, -1]] = 0.5
    lw = lf + np.log(w)[:, None] + np.log(w)[None, :]
    return float(logsumexp(lw) + np.log(axes[0][1] - axes[0][0]) + np.log(axes[1][1] - axes[1][0]))


# --- the Gaussian family -------------------------------------------------------------


def test_gaussian_natural_round_trip_and_log_partition():
    p0, _ = _random_pair()
    h, lam = p0.natural
    back = Gaussian.from_natural(h, lam, p0.log_z)
    np.testing.assert_allclose(back.mean, p0.mean, rtol=1e-10)
    np.testing.assert_allclose(back.cov, p0.cov, rtol=1e-10)
    # log f integrates to log_z (quadrature, independent of the closed form)
    assert _grid_log_z(p0) == pytest.approx(p0.log_z, abs=1e-6)
    x = np.random.default_rng(0).normal(size=(5, 2))
    eta_dot_g = x @ h - 0.5 * np.einsum("ni,ij,nj->n", x, lam, x)
    np.testing.assert_allclose(
        p0.log_density(x), eta_dot_g - p0.log_partition + p0.log_z, rtol=1e-10
    )


def test_gaussian_rejects_bad_input():
    with pytest.raises(ValueError, match="positive definite"):
        Gaussian(np.zeros(2), np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="cov must have shape"):
        Gaussian(np.zeros(2), np.eye(3))
    with pytest.raises(ValueError, match="path must be one of"):
        make_gaussian_path("spline", *_random_pair())


def test_kl_divergence_matches_monte_carlo():
    p, q = _random_pair()
    x = p.sample(np.random.default_rng(1), 400_000)
    diff = (p.log_density(x) - p.log_z) - (q.log_density(x) - q.log_z)
    se = diff.std() / np.sqrt(diff.size)
    assert kl_divergence(p, q) == pytest.approx(diff.mean(), abs=4 * se)
    assert kl_divergence(p, p) == pytest.approx(0.0, abs=1e-12)


# --- the two paths ----------------------------------------------------------------------


@pytest.mark.parametrize("cls", PATHS)
def test_endpoints_are_exact(cls):
    p0, p1 = _random_pair()
    path = cls(p0, p1)
    assert path.at(0.0) is p0 and path.at(1.0) is p1
    for tau, ref in ((1e-9, p0), (1 - 1e-9, p1)):
        g = path.at(tau)
        np.testing.assert_allclose(g.mean, ref.mean, atol=1e-6)
        np.testing.assert_allclose(g.cov, ref.cov, atol=1e-6)
        assert g.log_z == pytest.approx(ref.log_z, abs=1e-6)
    with pytest.raises(ValueError, match="tau"):
        path.at(1.5)


@pytest.mark.parametrize("tau", [0.1, 0.5, 0.83])
def test_moment_averaging_intermediate_moments(tau):
    p0, p1 = _random_pair()
    g = MomentAveragingGaussianPath(p0, p1).at(tau)
    # The moments of the mixture (1 − τ) p0 + τ p1 (what moment averaging matches).
    second = (1 - tau) * (p0.cov + np.outer(p0.mean, p0.mean)) + tau * (
        p1.cov + np.outer(p1.mean, p1.mean)
    )
    mean = (1 - tau) * p0.mean + tau * p1.mean
    np.testing.assert_allclose(g.mean, mean, rtol=1e-12)
    np.testing.assert_allclose(g.cov, second - np.outer(mean, mean), rtol=1e-10, atol=1e-12)
    _, half_s = g.moments
    np.testing.assert_allclose(half_s, -0.5 * second, rtol=1e-10)
    assert g.log_z == pytest.approx((1 - tau) * p0.log_z + tau * p1.log_z)
    assert _grid_log_z(g) == pytest.approx(g.log_z, abs=1e-6)


@pytest.mark.parametrize("tau", [0.2, 0.5, 0.9])
def test_geometric_natural_parameters_are_linear(tau):
    p0, p1 = _random_pair()
    g = GeometricGaussianPath(p0, p1).at(tau)
    (h0, l0), (h1, l1), (h, lam) = p0.natural, p1.natural, g.natural
    np.testing.assert_allclose(h, (1 - tau) * h0 + tau * h1, rtol=1e-10)
    np.testing.assert_allclose(lam, (1 - tau) * l0 + tau * l1, rtol=1e-10)
    # pointwise f_τ = f0^(1−τ) f1^τ, and its log normalizer by quadrature
    x = np.random.default_rng(2).normal(size=(7, 2)) * 3
    np.testing.assert_allclose(
        g.log_density(x), (1 - tau) * p0.log_density(x) + tau * p1.log_density(x), rtol=1e-10
    )
    assert _grid_log_z(g) == pytest.approx(g.log_z, abs=1e-6)


def test_paths_differ_and_moment_averaging_stretches_along_the_means():
    p0, p1 = _paper_pair()
    ga = GeometricGaussianPath(p0, p1).at(0.5)
    ma = MomentAveragingGaussianPath(p0, p1).at(0.5)
    # By hand: Λ̄ = I/(1−ρ²), h̄ = ½(Λ0 μ0 + Λ1 μ1) = (0, −10ρ)/(1−ρ²), so the GA midpoint
    # is N((0, −10ρ), (1−ρ²) I): off the segment between the means, and narrow.
    rho = 0.85
    np.testing.assert_allclose(ga.mean, [0.0, -10 * rho], atol=1e-9)
    np.testing.assert_allclose(ga.cov, (1 - rho**2) * np.eye(2), atol=1e-12)
    # MA: on the segment, spread along x (the direction of μ1 − μ0) by τ(1−τ)·20² = 100
    np.testing.assert_allclose(ma.mean, [0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(ma.cov, [[101.0, 0.0], [0.0, 1.0]], atol=1e-12)


# --- exact AIS under perfect transitions ----------------------------------------------


@pytest.mark.parametrize("cls", PATHS)
def test_exact_log_weight_mean_and_variance_match_simulation(cls):
    p0, p1 = _random_pair()
    path = cls(p0, p1)
    taus = np.linspace(0, 1, 9)
    lw = ais_log_weights(np.random.default_rng(5), path, taus, 50_000)
    mean, var = expected_log_weight(path, taus), log_weight_variance(path, taus)
    assert lw.mean() == pytest.approx(mean, abs=4 * np.sqrt(lw.var() / lw.size))
    se_var = np.sqrt(np.var((lw - lw.mean()) ** 2) / lw.size)
    assert lw.var() == pytest.approx(var, abs=4 * se_var)
    assert mean < p1.log_z - p0.log_z  # the bias Σ KL is positive


@pytest.mark.parametrize("cls", PATHS)
@pytest.mark.parametrize("transition", ["exact", "gibbs"])
def test_ais_is_unbiased_in_z(cls, transition):
    # Benign pair so that w has a finite, modest variance; replicate runs give the error bar.
    p0 = Gaussian(np.array([0.0, 0.0]), np.array([[1.0, 0.3], [0.3, 1.0]]), log_z=0.2)
    p1 = Gaussian(np.array([1.0, -0.5]), np.array([[0.8, -0.2], [-0.2, 1.2]]), log_z=1.1)
    path = cls(p0, p1)
    rng = np.random.default_rng(11)
    taus = np.linspace(0, 1, 6)
    z = np.array(
        [
            np.exp(log_mean_exp(ais_log_weights(rng, path, taus, 1000, transition=transition)))
            for _ in range(40)
        ]
    )
    truth = np.exp(p1.log_z - p0.log_z)
    assert z.mean() == pytest.approx(truth, abs=4 * z.std(ddof=1) / np.sqrt(z.size))


def test_ais_rejects_bad_arguments():
    path = GeometricGaussianPath(*_random_pair())
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="transition"):
        ais_log_weights(rng, path, [0, 1], 10, transition="hmc")
    with pytest.raises(ValueError, match="taus"):
        ais_log_weights(rng, path, [0, 0.7, 0.5, 1], 10)


def test_cost_functional_is_shared_and_is_the_asymptotic_bias():
    # Theorems 1-2 of seed 004: K · Σ KL → F = ½ (η1 − η0)ᵀ (s1 − s0) on both paths.
    p0, p1 = _random_pair()
    f_ga = segment_costs(GeometricGaussianPath(p0, p1), [0.0, 1.0])[0]
    f_ma = segment_costs(MomentAveragingGaussianPath(p0, p1), [0.0, 1.0])[0]
    assert f_ga == pytest.approx(f_ma, rel=1e-10)
    k = 4000
    taus = np.linspace(0, 1, k + 1)
    for cls in PATHS:
        path = cls(p0, p1)
        bias = (p1.log_z - p0.log_z) - expected_log_weight(path, taus)
        assert k * bias == pytest.approx(f_ga, rel=2e-3)
    # segments add up to the whole for the geometric path (natural parameters linear)
    knots = np.linspace(0, 1, 6)
    ga = segment_costs(GeometricGaussianPath(p0, p1), knots)
    assert np.all(ga > 0)


# --- optimal binned schedule -----------------------------------------------------------


def test_binned_allocation_sums_to_k_and_is_the_integer_optimum():
    costs = np.array([5.0, 0.2, 1.0, 9.0])
    for k in (4, 7, 12):
        a = binned_allocation(costs, k)
        assert a.sum() == k and np.all(a >= 1)
        best = min(
            (c for c in itertools.product(range(1, k + 1), repeat=costs.size) if sum(c) == k),
            key=lambda c: np.sum(costs / np.array(c)),
        )
        assert np.sum(costs / a) == pytest.approx(np.sum(costs / np.array(best)))
    a = binned_allocation(costs, 400)
    np.testing.assert_allclose(a / 400, np.sqrt(costs) / np.sqrt(costs).sum(), atol=0.01)
    with pytest.raises(ValueError, match="at least the number of segments"):
        binned_allocation(costs, 3)


def test_binned_schedule_contains_the_knots():
    knots = np.array([0.0, 0.25, 0.5, 1.0])
    s = binned_schedule(knots, np.array([2, 1, 3]))
    np.testing.assert_allclose(s, [0, 0.125, 0.25, 0.5, 2 / 3, 5 / 6, 1.0])


def test_optimal_binned_schedule_crowds_where_the_divergence_is_large():
    p0, p1 = _paper_pair()
    path = MomentAveragingGaussianPath(p0, p1)
    knots = np.linspace(0, 1, 11)
    costs = segment_costs(path, knots)
    taus = optimal_binned_schedule(path, 200)
    assert taus.size == 201 and taus[0] == 0 and taus[-1] == 1
    counts = np.histogram(taus[1:], bins=knots)[0]
    assert counts.sum() == 200
    # more points where F_j is larger: the MA path's cost is at its endpoints
    order = np.argsort(costs)
    assert np.all(np.diff(counts[order]) >= 0)
    assert counts[0] > 3 * counts[5] and counts[-1] > 3 * counts[4]
    # and the exact bias falls well below the linear schedule's
    lin = np.linspace(0, 1, 201)
    assert -expected_log_weight(path, taus) < 0.5 * -expected_log_weight(path, lin)


# --- thermodynamic schedule for general paths ---------------------------------------------


def _exact_metric(path, grid, h=1e-5):
    """G(τ) = Var_τ[∂_τ log f_τ] from exact draws and a central difference of the log density."""
    rng = np.random.default_rng(7)
    out = []
    for t in grid:
        x = path.at(float(t)).sample(rng, 20000)
        lo, hi = max(t - h, 0.0), min(t + h, 1.0)
        u = (path.at(hi).log_density(x) - path.at(lo).log_density(x)) / (hi - lo)
        out.append(fisher_metric(u))
    return np.array(out)


@pytest.mark.parametrize("cls", PATHS)
def test_thermodynamic_schedule_from_a_pilot_beats_linear(cls):
    p0, p1 = _paper_pair()
    path = cls(p0, p1)
    grid = np.linspace(0, 1, 41)
    metric = _exact_metric(path, grid)
    k = 100
    s = thermodynamic_schedule(grid, metric, k)
    lin = np.linspace(0, 1, k + 1)
    bias_s, bias_lin = -expected_log_weight(path, s), -expected_log_weight(path, lin)
    assert bias_s <= bias_lin * 1.01
    if cls is MomentAveragingGaussianPath:
        assert bias_s < 0.5 * bias_lin  # the MA path's linear schedule is far from optimal


def test_thermodynamic_length_and_the_optimal_cost():
    # Seed 004's appendix example: N(−½, σ²) to N(½, σ²). Geometric: ℓ = 1/σ and the linear
    # schedule is optimal (F = ℓ²/2 = 1/(2σ²)). Moment averaging: same F, but a much shorter
    # path, and the equal-length schedule reaches K · Σ KL ≈ ℓ²/2.
    sd = 0.1
    p0 = Gaussian(np.array([-0.5]), np.array([[sd**2]]))
    p1 = Gaussian(np.array([0.5]), np.array([[sd**2]]))
    ga = GeometricGaussianPath(p0, p1)
    assert thermodynamic_length(ga) == pytest.approx(1 / sd, rel=1e-6)
    assert segment_costs(ga, [0.0, 1.0])[0] == pytest.approx(0.5 / sd**2, rel=1e-10)
    ma = MomentAveragingGaussianPath(p0, p1)
    ell = thermodynamic_length(ma)
    assert ell**2 / 2 < 0.4 * segment_costs(ma, [0.0, 1.0])[0]
    half = np.geomspace(1e-6, 0.5, 400)
    grid = np.unique(np.r_[0.0, half, 1.0 - half, 1.0])
    length = np.r_[0.0, np.cumsum(np.sqrt(2 * segment_costs(ma, grid)))]
    k = 2000
    sched = np.interp(np.linspace(0, length[-1], k + 1), length, grid)
    sched[0], sched[-1] = 0.0, 1.0
    assert k * -expected_log_weight(ma, sched) == pytest.approx(ell**2 / 2, rel=1e-2)
