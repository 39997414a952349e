"""Waste-free SMC (Dau & Chopin 2022) in the annealing loop, and the trajectory-length rule
and dense metric of HMC (core/kernels/hmc.py) on Gaussian targets."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_crais.core.anneal import AnnealOptions, anneal
from pymc_crais.core.density import FunctionDensity
from pymc_crais.core.kernels.hmc import HMC
from pymc_crais.core.particles import ParticleState
from pymc_crais.core.paths import make_path
from pymc_crais.core.schedules.adaptive import ESSSchedule
from pymc_crais.validation.testing import linear_regression_density


def _smc(seed, n=1000, **settings):
    dens, log_z = linear_regression_density()
    rng = np.random.default_rng(seed)
    res = anneal(rng, dens, dens.sample_q0(rng, n), make_path(0.0), ESSSchedule(0.5), HMC(),
                 resample="always", tune_from_weights=True, **settings)
    return res, log_z


def test_waste_free_population_and_cost():
    """Each resampling stage keeps N states: ⌈N/P⌉ chain starts and P − 1 transitions."""
    n, p = 1000, 10
    res, _ = _smc(0, n, waste_free=p, n_mcmc_steps=1)
    st = res.stages
    assert res.state.n == n and res.log_weights.shape == (n,)
    resampled = st["resampled"]
    assert resampled[:-1].all() and not resampled[-1]
    # chain stages make P − 1 transitions; the last stage (no resampling at tau = 1) one
    np.testing.assert_array_equal(st["mcmc_steps"][:-1], p - 1)
    assert st["mcmc_steps"][-1] == 1
    # families: each of the N/P chains of a stage shares its start's initial ancestor
    assert res.n_eves <= n


def test_waste_free_option_errors():
    with pytest.raises(ValueError, match="waste_free"):
        AnnealOptions(waste_free=1)
    with pytest.raises(ValueError, match="waste_free"):
        AnnealOptions(waste_free=-2)


@pytest.mark.parametrize("p", [5, 20])
def test_waste_free_smc_exact_evidence(p):
    """Six independent runs on the 5-d linear regression (exact log Z): the mean error is
    within 4 of its standard errors (the runs' spread; the reported MCSEs must be of the
    same size), so the test fails on a bias of a few tenths of a nat."""
    errs, mcses = [], []
    for seed in range(6):
        res, log_z = _smc(100 + seed, waste_free=p, n_mcmc_steps=1)
        errs.append(res.log_marginal_likelihood - log_z)
        mcses.append(np.sqrt(res.log_z_variance))
    errs, mcses = np.array(errs), np.array(mcses)
    se = errs.std(ddof=1) / np.sqrt(errs.size)
    assert abs(errs.mean()) <= 4.0 * max(se, np.sqrt(np.mean(mcses**2) / errs.size)), (errs, mcses)
    # the reported MCSE is of the size of the spread of the runs (not 10x off)
    assert 0.2 < np.sqrt(np.mean(mcses**2)) / errs.std(ddof=1) < 5.0, (errs, mcses)


# ----------------------------------------------------------------- HMC trajectory, metric


def test_trajectory_length_rule():
    k = HMC()
    assert k.leapfrogs_for(0.25) == 5  # ⌈1.25 / 0.25⌉
    assert k.leapfrogs_for(0.3) == 5
    assert k.leapfrogs_for(2.0) == 1
    assert k.leapfrogs_for(1e-3) == 10  # capped by max_leapfrog
    assert k.leapfrogs_for(np.array([[0.25], [0.5], [0.1]])) == 5  # per particle: the median
    assert HMC(n_leapfrog=3).leapfrogs_for(1e-3) == 3
    assert HMC(trajectory_length=2.0, max_leapfrog=50).leapfrogs_for(0.1) == 20
    with pytest.raises(ValueError, match="n_leapfrog"):
        HMC(n_leapfrog="many")
    with pytest.raises(ValueError, match="trajectory_length"):
        HMC(trajectory_length=0.0)


def _gaussian(d, seed=0, rotated=False):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((d, d))
    cov = a @ a.T / d + np.diag(np.geomspace(0.01, 4.0, d))
    if rotated:  # eigenvalues 0.01 to 1 along random directions: strong correlations
        q, _ = np.linalg.qr(a)
        cov = (q * np.geomspace(0.01, 1.0, d)) @ q.T
    mean = 3.0 * rng.standard_normal(d)
    prec = np.linalg.inv(cov)

    def log_target(x):
        r = x - mean
        return -0.5 * np.einsum("ij,jk,ik->i", r, prec, r)

    dens = FunctionDensity(d, lambda x: -0.5 * np.sum(x * x, axis=1), log_target, lambda x: -x,
                           lambda x: -(x - mean) @ prec)
    return dens, mean, cov


@pytest.mark.parametrize("dense_max_dim", [0, 150])
def test_hmc_leaves_a_correlated_gaussian_invariant(dense_max_dim):
    """Exact draws of a correlated, badly scaled 8-d Gaussian, 15 tuned transitions (step
    size adapted, trajectory length from it, dense or diagonal metric, families): the
    moved particles' mean and covariance match the target's within Monte Carlo error."""
    d, n = 8, 4000
    dens, mean, cov = _gaussian(d)
    rng = np.random.default_rng(1)
    x = mean + rng.standard_normal((n, d)) @ np.linalg.cholesky(cov).T
    k = HMC(dense_max_dim=dense_max_dim)
    st = ParticleState.evaluate(dens, x, True).with_family(np.arange(n))
    params, info = k.init(st), None
    for _ in range(15):
        params = k.tune(params, st, info)
        st, info = k.step(rng, st, dens, make_path(0.0), 1.0, params)
    assert (params.split_chol is not None) == (dense_max_dim > 0)
    assert 0.2 < info.acceptance_rate < 0.99
    sd = np.sqrt(np.diag(cov))
    z_mean = (st.x.mean(0) - mean) / (sd / np.sqrt(n))
    assert np.all(np.abs(z_mean) < 5.0), z_mean
    # covariance entries: sd of a sample covariance ≈ sqrt((Σ_ij² + Σ_ii Σ_jj) / n)
    c = np.cov(st.x.T)
    se = np.sqrt((cov**2 + np.outer(np.diag(cov), np.diag(cov))) / n)
    assert np.all(np.abs(c - cov) < 5.0 * se), np.max(np.abs(c - cov) / se)


def test_dense_metric_mixes_a_correlated_gaussian_faster():
    """What the dense metric is for: on a strongly correlated Gaussian a transition moves
    the particles further (in the target's own metric) per model evaluation than with the
    diagonal one, whose step size is held back by the narrow directions."""
    d, n = 20, 2000
    dens, mean, cov = _gaussian(d, seed=3, rotated=True)
    rng = np.random.default_rng(2)
    x = mean + rng.standard_normal((n, d)) @ np.linalg.cholesky(cov).T
    prec = np.linalg.inv(cov)
    jumps = {}
    for dense in (0, 150):
        k = HMC(dense_max_dim=dense)
        st = ParticleState.evaluate(dens, x, True).with_family(np.arange(n))
        params, info = k.init(st), None
        for _ in range(5):  # adapt the step size
            params = k.tune(params, st, info)
            new, info = k.step(np.random.default_rng(5), st, dens, make_path(0.0), 1.0, params)
        r = new.x - x
        jumps[dense] = np.mean(np.einsum("ij,jk,ik->i", r, prec, r)) / d / info.n_evals * n
    assert jumps[150] > 2.0 * jumps[0], jumps

