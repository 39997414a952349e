"""Persistent sampling (core/persistent.py): the multiple-importance recursion on exact
draws of a Gaussian path, the pooled ESS rule, the memory caps, and whole runs."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_crais.core.schedules.adaptive import ESSSchedule
from pymc_crais.core.anneal import AnnealOptions, anneal
from pymc_crais.core.density import FunctionDensity
from pymc_crais.core.kernels.hmc import HMC
from pymc_crais.core.particles import ParticleState
from pymc_crais.core.paths import make_path
from pymc_crais.core.persistent import (
    PersistentHistory,
    PersistentSampling,
    mixture_log_density,
    pooled_ess_tau,
)
from pymc_crais.core.weights import ess_from_log_weights, logsumexp

from pymc_crais.validation.testing import linear_regression_density

D, M_SHIFT, SD, LOG_Z = 3, 1.5, 0.4, -2.0  # target: Z · N(M_SHIFT, SD² I); q0 = N(0, I)


def _tempered(tau):
    """Precision, mean and exact log Z_τ of γ_τ = q0^(1−τ) π̃^τ (per coordinate, Gaussian)."""
    lam = (1.0 - tau) + tau / SD**2
    mu = tau * M_SHIFT / SD**2 / lam
    per = (
        -0.5 * (1 - tau) * np.log(2 * np.pi)
        - 0.5 * tau * np.log(2 * np.pi * SD**2)
        + 0.5 * np.log(2 * np.pi / lam)
        - 0.5 * tau * M_SHIFT**2 / SD**2
        + 0.5 * lam * mu**2
    )
    return lam, mu, tau * LOG_Z + D * per


def _density():
    def log_q0(x):
        return -0.5 * np.sum(x * x, axis=1) - 0.5 * D * np.log(2 * np.pi)

    def log_target(x):
        r = x - M_SHIFT
        return LOG_Z - 0.5 * np.sum(r * r, axis=1) / SD**2 - 0.5 * D * np.log(2 * np.pi * SD**2)

    return FunctionDensity(D, log_q0, log_target)


def _exact_draws(rng, dens, tau, n):
    lam, mu, _ = _tempered(tau)
    return ParticleState.evaluate(dens, mu + rng.standard_normal((n, D)) / np.sqrt(lam), False)


def _recursion(seed, taus, n, max_populations=None):
    """Feed exact draws of each γ_τ into a history; returns the log Ẑ_τ estimates, their
    delta-method standard errors (valid here: the draws are independent) and the history."""
    rng = np.random.default_rng(seed)
    dens, path = _density(), make_path(0.0)
    hist = PersistentHistory(path, max_populations)
    hist.add(_exact_draws(rng, dens, 0.0, n), np.arange(n), 0.0, 0.0)
    est, se = [], []
    for tau in taus:
        lw = hist.log_weights(tau)
        log_z = logsumexp(lw) - np.log(hist.m)
        w = np.exp(lw - log_z)
        est.append(log_z)
        se.append(w.std(ddof=1) / np.sqrt(hist.m))
        hist.add(_exact_draws(rng, dens, tau, n), np.arange(n), tau, log_z)
    return np.array(est), np.array(se), hist


@pytest.mark.parametrize("max_populations", [None, 2])
def test_recursion_estimates_every_log_z(max_populations):
    """Exact draws of each tempered Gaussian, weighted by the balance heuristic with the
    recursion's own Ẑ_s, over 12 replicate seeds: the mean error of every log Ẑ_τ is
    within 4 standard errors of the replicates' spread (the recursion carries each Ẑ_s's
    error forward, so one run's delta-method error understates its own), plus 0.01 nat
    for the O(1/N) bias of a log."""
    taus = np.array([0.05, 0.15, 0.35, 0.6, 1.0])
    exact = np.array([_tempered(t)[2] for t in taus])
    errs = []
    for seed in range(12):
        est, _, hist = _recursion(seed, taus, 1000, max_populations)
        errs.append(est - exact)
    errs = np.array(errs)
    se = errs.std(axis=0, ddof=1) / np.sqrt(len(errs))
    assert np.all(np.abs(errs.mean(axis=0)) < 4 * se + 0.01), (errs.mean(axis=0), se)
    assert np.all(errs.std(axis=0) < 0.2)  # and each run is precise
    assert len(hist.states) == (len(taus) + 1 if max_populations is None else max_populations)


def test_history_mixture_is_kept_up_to_date():
    """The mixture density updated as populations join (and recomputed when one leaves)
    equals the one computed from scratch over the kept populations."""
    taus = [0.1, 0.3, 0.7]
    for cap in (None, 3):
        _, _, hist = _recursion(1, taus, 300, cap)
        full = mixture_log_density(hist.path, hist.delta, hist.taus, hist.log_zs, hist.sizes)
        np.testing.assert_allclose(hist.log_mixture, full, rtol=1e-12, atol=1e-12)
        assert hist.m == sum(hist.sizes) == hist.delta.size


def test_pooled_ess_rule_hits_its_target():
    """The next τ's pooled weights have ESS = ρN (when the step is not capped), and the
    pooled ESS may exceed N when the populations overlap."""
    _, _, hist = _recursion(2, [0.05, 0.1], 1000)
    assert ess_from_log_weights(hist.log_weights(0.1)) > 1000  # 3000 pooled particles
    tau = pooled_ess_tau(hist, 0.1, 0.5 * 1000)
    assert 0.1 < tau < 1.0
    ess = ess_from_log_weights(hist.log_weights(tau))
    assert ess == pytest.approx(500, rel=1e-4)
    assert pooled_ess_tau(hist, 0.1, 500, max_dtau=0.01) == pytest.approx(0.11)


def test_memory_cap_keeps_the_newest_populations():
    rng = np.random.default_rng(3)
    dens = _density()
    st = _exact_draws(rng, dens, 0.0, 100)
    hist = PersistentHistory(make_path(0.0), None, max_bytes=2.5 * PersistentHistory.nbytes(st))
    for k in range(5):
        hist.add(st, np.arange(100), 0.1 * k, 0.0)
    assert hist.taus == [0.30000000000000004, 0.4] and hist.n_dropped == 3
    with pytest.raises(ValueError, match="max_populations"):
        PersistentSampling(max_populations=1)


def test_take_returns_the_pooled_particles_in_order():
    _, _, hist = _recursion(4, [0.2, 0.5], 50)
    idx = np.array([140, 3, 77, 3, 149, 50])
    state, eve = hist.take(idx)
    pooled = np.concatenate([s.x for s in hist.states])
    np.testing.assert_array_equal(state.x, pooled[idx])
    np.testing.assert_array_equal(eve, idx % 50)


def _ps(seed, n=1000, **kw):
    dens, log_z = linear_regression_density()
    rng = np.random.default_rng(seed)
    opts = AnnealOptions.from_settings(
        resample="always", tune_from_weights=True, stages=PersistentSampling(**kw)
    )
    res = anneal(rng, dens, dens.sample_q0(rng, n), make_path(0.0), ESSSchedule(0.5), HMC(), opts)
    return res, log_z


def test_persistent_runs_resample_from_the_pool_and_estimate_log_z():
    """Six runs on the 5-d linear regression (exact log Z): every stage resamples (τ = 1
    included), the run reports no within-chain error, and the mean error is within 4
    standard errors of the runs' spread."""
    errs = []
    for seed in range(6):
        res, log_z = _ps(200 + seed)
        assert res.stages["resampled"].all() and np.isnan(res.log_z_variance)
        assert res.state.n == 1000 and np.all(res.log_weights == 0)
        np.testing.assert_allclose(
            res.log_marginal_likelihood, res.stages["log_z_increment"].sum() + res.c
        )
        errs.append(res.log_marginal_likelihood - log_z)
    errs = np.array(errs)
    assert abs(errs.mean()) <= 4 * errs.std(ddof=1) / np.sqrt(errs.size) + 0.01, errs
