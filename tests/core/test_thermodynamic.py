"""Thermodynamic-length schedules of the package (``pymc_crais.core.schedules.thermodynamic``): the
path score, the Fisher metric and the schedule from a pilot, checked by finite differences
and 1-D quadrature. On the Gaussian study's exact paths: tests/core/test_moment_averaging.py."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import logsumexp

from pymc_crais.core.schedules.thermodynamic import (
    fisher_metric,
    path_score,
    schedule_bias,
    thermodynamic_schedule,
)


def test_thermodynamic_schedule_basic_properties():
    grid = np.linspace(0, 1, 11)
    lin = thermodynamic_schedule(grid, np.full(11, 3.0), 20)
    np.testing.assert_allclose(lin, np.linspace(0, 1, 21), atol=1e-12)
    g = np.where(grid < 0.3, 100.0, 1.0)  # metric 100× larger below 0.3 → 10× denser
    s = thermodynamic_schedule(grid, g, 50)
    assert s.size == 51 and s[0] == 0 and s[-1] == 1 and np.all(np.diff(s) > 0)
    assert np.sum(s[1:] <= 0.2) > 4 * np.sum((s[1:] > 0.5) & (s[1:] <= 0.7))
    assert schedule_bias(grid, g, s) < schedule_bias(grid, g, np.linspace(0, 1, 51))
    # zero metric everywhere: linear
    np.testing.assert_allclose(thermodynamic_schedule(grid, np.zeros(11), 4), np.linspace(0, 1, 5))
    with pytest.raises(ValueError, match="metric"):
        thermodynamic_schedule(grid, -g, 10)
    with pytest.raises(ValueError, match="only its first and last"):
        thermodynamic_schedule(grid, np.r_[1.0, np.nan, np.ones(9)], 10)
    end_nan = thermodynamic_schedule(grid, np.r_[np.inf, np.ones(10)], 10)
    np.testing.assert_allclose(end_nan, np.linspace(0, 1, 11), atol=1e-12)
    with pytest.raises(ValueError, match="tau"):
        thermodynamic_schedule(grid[::-1], g, 10)


def test_path_score_is_the_tau_derivative_of_the_power_mean_path():
    rng = np.random.default_rng(4)
    delta = rng.normal(size=50) * 3
    c = 0.7

    def log_gamma(tau, alpha):  # ALGORITHMS.md section 2, log q0 omitted
        if alpha == 0:
            return tau * delta
        return np.logaddexp(np.log1p(-tau), np.log(tau) + alpha * (delta - c)) / alpha

    np.testing.assert_array_equal(path_score(delta, 0.3), delta)
    for alpha in (-1.0, -0.5, 0.5, 1.0):
        for tau in (0.1, 0.5, 0.9):
            h = 1e-6
            fd = (log_gamma(tau + h, alpha) - log_gamma(tau - h, alpha)) / (2 * h)
            np.testing.assert_allclose(path_score(delta, tau, alpha, c), fd, rtol=1e-5, atol=1e-6)
        r = np.exp(alpha * (delta - c))
        np.testing.assert_allclose(path_score(delta, 0.0, alpha, c), (r - 1) / alpha)
        np.testing.assert_allclose(path_score(delta, 1.0, alpha, c), (1 - 1 / r) / alpha)
    np.testing.assert_allclose(path_score(delta, 0.4, 1e-7, c), delta - c, rtol=1e-5, atol=1e-5)
    assert np.isnan(path_score(np.array([np.nan]), 0.5, 0.5)[0])


@pytest.mark.parametrize("alpha", [0.0, 0.5, -1.0])
def test_metric_gives_the_local_kl_of_the_power_mean_path(alpha):
    # 1-D, by quadrature: KL(p_τ ‖ p_{τ+h}) ≈ ½ h² Var_τ(∂_τ log γ_τ).
    x = np.linspace(-12, 12, 20001)
    log_q0 = -0.5 * x**2 - 0.5 * np.log(2 * np.pi)
    log_target = -0.5 * ((x - 2.0) / 0.5) ** 2 + 1.3
    delta, c = log_target - log_q0, 1.0

    def log_p(tau):
        if alpha == 0:
            lg = log_q0 + tau * delta
        else:
            lg = log_q0 + np.logaddexp(np.log1p(-tau), np.log(tau) + alpha * (delta - c)) / alpha
        return lg - logsumexp(lg)

    for tau in (0.2, 0.6):
        h = 1e-3
        lp, lq = log_p(tau), log_p(tau + h)
        kl = np.sum(np.exp(lp) * (lp - lq))
        g = fisher_metric(path_score(delta, tau, alpha, c), lp)
        assert kl == pytest.approx(0.5 * h**2 * g, rel=5e-3)


def test_fisher_metric_is_the_weighted_variance():
    rng = np.random.default_rng(0)
    u, lw = rng.normal(size=100), rng.normal(size=100)
    w = np.exp(lw) / np.exp(lw).sum()
    assert fisher_metric(u, lw) == pytest.approx(np.sum(w * (u - np.sum(w * u)) ** 2))
    u2 = u.copy()
    u2[3] = np.nan
    keep = np.arange(100) != 3
    assert fisher_metric(u2, lw) == pytest.approx(fisher_metric(u[keep], lw[keep]))
    assert fisher_metric(np.array([1.0])) == 0.0


@pytest.mark.parametrize(("alpha", "ratio"), [(0.0, 0.4), (0.5, 1.2), (1.0, 0.6)])
def test_pilot_schedule_on_a_power_mean_path(alpha, ratio):
    # 1-D by quadrature: q0 = N(0, 1) to a narrow, shifted, unnormalized Gaussian target.
    # Exact Σ KL at K = 30 (thermodynamic / linear): α = 0 0.21 / 0.82; α = 1 0.54 / 1.25 with
    # the divergent metric at τ = 1 passed as nan; α = 0.5 has a nearly flat metric (3.5–7.5)
    # and the schedule is 15 % worse than linear there (third-order terms at the ends).
    x = np.linspace(-10, 10, 8001)
    log_q0 = -0.5 * x**2 - 0.5 * np.log(2 * np.pi)
    delta = (-0.5 * ((x - 1.5) / 0.2) ** 2 + 0.4) - log_q0
    c = 0.4 + 0.5 * np.log(2 * np.pi * 0.04)  # the target's log Z: α(Δ − c) = O(1) near it

    def log_p(tau):
        if alpha == 0 or tau in (0.0, 1.0):
            lg = log_q0 + tau * (delta - c)
        else:
            lg = log_q0 + np.logaddexp(np.log1p(-tau), np.log(tau) + alpha * (delta - c)) / alpha
        return lg - logsumexp(lg)

    def sum_kl(sched):
        lps = [log_p(t) for t in sched]
        return sum(np.sum(np.exp(a) * (a - b)) for a, b in itertools.pairwise(lps))

    grid = np.linspace(0, 1, 41)
    metric = np.array([fisher_metric(path_score(delta, t, alpha, c), log_p(t)) for t in grid])
    if alpha == 1.0:
        assert metric[-1] > 1e100  # E_{p1}[u²] diverges: the target is much narrower than q0
        metric[-1] = np.nan
    k = 30
    s = thermodynamic_schedule(grid, metric, k)
    assert sum_kl(s) < ratio * sum_kl(np.linspace(0, 1, k + 1))
