"""Mutation kernels (docs/algorithms.md, "Kernels"): invariance of γ_τ, bookkeeping, errors.

Invariance is checked by starting N particles from *exact* draws of γ_τ, running 20
transitions with fixed parameters, and comparing the per-coordinate mean, variance (and,
for Gaussian γ_τ, covariances) with the exact values, within 5 standard errors computed
from the exact moments.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import pymc_crais.core.kernels as kernels_mod
import pymc_crais.core.kernels.imh as imh_mod
from pymc_crais.core.density import FunctionDensity
from pymc_crais.core.kernels import (
    HMC,
    FinalIMH,
    IMHThenHMC,
    IndependentMetropolis,
    KernelInfo,
    RandomWalkMetropolis,
    make_kernel,
    particle_variance,
    with_step_size,
)
from pymc_crais.core.particles import ParticleState
from pymc_crais.core.paths import ArrayTauPath, make_path

D = 3
N = 4000
N_STEPS = 20
LOGZ = 1.3
M = np.array([1.0, -0.5, 2.0])
S = np.array([[1.0, 0.6, 0.2], [0.6, 2.0, -0.5], [0.2, -0.5, 0.5]])
P = np.linalg.inv(S)
_, LOGDET_S = np.linalg.slogdet(S)


def _log_q0(x):
    return -0.5 * np.sum(x * x, axis=1) - 0.5 * D * np.log(2 * np.pi)


def _grad_q0(x):
    return -x


def _log_target(x):
    r = x - M
    return LOGZ - 0.5 * np.einsum("ni,ij,nj->n", r, P, r) - 0.5 * (D * np.log(2 * np.pi) + LOGDET_S)


def _grad_target(x):
    return -(x - M) @ P


def make_density(gradients=True):
    if gradients:
        return FunctionDensity(D, _log_q0, _log_target, _grad_q0, _grad_target)
    return FunctionDensity(D, _log_q0, _log_target)


def geometric_tempered(tau):
    """γ_τ ∝ q0^{1−τ} π^τ = N(μ_τ, Σ_τ) with Σ_τ⁻¹ = (1−τ) I + τ S⁻¹."""
    prec = (1 - tau) * np.eye(D) + tau * P
    cov = np.linalg.inv(prec)
    return cov @ (tau * P @ M), cov


# --------------------------------------------------------------------------- harness


def _draw_gaussian(rng, mean, cov, n):
    return mean + rng.standard_normal((n, D)) @ np.linalg.cholesky(cov).T


def _draw_mixture(rng, tau, n):
    comp = rng.random(n) < tau
    x = rng.standard_normal((n, D))
    x[comp] = _draw_gaussian(rng, M, S, int(comp.sum()))
    return x


def _mixture_moments(tau):
    """Per-coordinate mean, variance and 4th central moment of (1−τ) N(0,I) + τ N(M,S)."""
    mean = tau * M
    comps = [(1 - tau, np.zeros(D), np.ones(D)), (tau, M, np.diag(S))]
    var = sum(w * (s2 + (m - mean) ** 2) for w, m, s2 in comps)
    mu4 = sum(w * ((m - mean) ** 4 + 6 * (m - mean) ** 2 * s2 + 3 * s2**2) for w, m, s2 in comps)
    return mean, var, mu4


def _run(kernel, path, tau, x0, seed, params_fn=None):
    dens = make_density(gradients=kernel.needs_gradient)
    rng = np.random.default_rng(seed)
    state = ParticleState.evaluate(dens, x0, gradient=kernel.needs_gradient)
    params = kernel.tune(kernel.init(state), state, None)
    if params_fn is not None:
        params = params_fn(params)
    accs = []
    for _ in range(N_STEPS):
        before = dens.n_evals
        state, info = kernel.step(rng, state, dens, path, tau, params)
        assert isinstance(info, KernelInfo)
        assert 0.0 < info.acceptance_rate <= 1.0
        expected = N * _evals_per_particle(kernel, tau)
        assert info.n_evals == expected
        assert dens.n_evals - before == expected
        accs.append(info.acceptance_rate)
    return state, np.array(accs), dens


def _evals_per_particle(kernel, tau):
    if isinstance(kernel, FinalIMH):  # independence moves at τ = 1 (they stay above 29 % here)
        return 1 if np.ndim(tau) == 0 and tau == 1.0 else kernel.hmc.n_leapfrog
    return getattr(kernel, "n_leapfrog", 1)


def _z_scores_gaussian(x, mean, cov):
    n = x.shape[0]
    var = np.diag(cov)
    z_mean = (x.mean(axis=0) - mean) / np.sqrt(var / n)
    z_var = (x.var(axis=0, ddof=1) - var) / (np.sqrt(2.0 / n) * var)
    emp = np.cov(x.T)
    iu = np.triu_indices(D, 1)
    se_cov = np.sqrt((np.outer(var, var) + cov**2)[iu] / n)
    z_cov = (emp[iu] - cov[iu]) / se_cov
    return np.concatenate([z_mean, z_var, z_cov])


def _z_scores_mixture(x, tau):
    n = x.shape[0]
    mean, var, mu4 = _mixture_moments(tau)
    z_mean = (x.mean(axis=0) - mean) / np.sqrt(var / n)
    z_var = (x.var(axis=0, ddof=1) - var) / np.sqrt((mu4 - var**2) / n)
    return np.concatenate([z_mean, z_var])


KERNELS = {
    "rwmh": lambda: RandomWalkMetropolis(),
    "hmc1": lambda: HMC(n_leapfrog=1),
    "hmc5": lambda: HMC(n_leapfrog=5),
    "imh": lambda: IndependentMetropolis(),
    "imh_then_hmc": lambda: IMHThenHMC(),
    "hmc_final_imh": lambda: FinalIMH(n_leapfrog=5),
}


def _assert_moved(x0, state, accs):
    # a kernel that never moves would pass the invariance check trivially
    assert accs.mean() > 0.1
    moved = np.any(state.x != x0, axis=1).mean()
    assert moved > 0.5, moved
    corr = [np.corrcoef(x0[:, j], state.x[:, j])[0, 1] for j in range(D)]
    assert max(corr) < 0.9, corr


def _assert_cache_consistent(state, dens, gradient):
    ev = ParticleState.evaluate(dens, state.x, gradient=gradient)
    np.testing.assert_array_equal(state.log_q0, ev.log_q0)
    np.testing.assert_array_equal(state.delta, ev.delta)
    if gradient:
        np.testing.assert_array_equal(state.grad_log_q0, ev.grad_log_q0)
        np.testing.assert_array_equal(state.grad_delta, ev.grad_delta)


# --------------------------------------------------------------------------- invariance


@pytest.mark.parametrize("kname", sorted(KERNELS))
@pytest.mark.parametrize("tau", [1.0, 0.4])
def test_geometric_tempered_gaussian_is_invariant(kname, tau):
    kernel = KERNELS[kname]()
    mean, cov = geometric_tempered(tau)
    if tau == 1.0:
        np.testing.assert_allclose(mean, M, atol=1e-12)
        np.testing.assert_allclose(cov, S, atol=1e-12)
    rng = np.random.default_rng(100 + int(10 * tau))
    x0 = _draw_gaussian(rng, mean, cov, N)
    state, accs, dens = _run(kernel, make_path(0.0), tau, x0, seed=7)
    z = _z_scores_gaussian(state.x, mean, cov)
    assert np.all(np.abs(z) < 5.0), z
    _assert_moved(x0, state, accs)
    _assert_cache_consistent(state, dens, kernel.needs_gradient)


@pytest.mark.parametrize("alpha", [0.5, 1.0, -0.5, 2.0])
@pytest.mark.parametrize("kname", ["rwmh", "hmc5"])
def test_target_is_invariant_at_tau_one_for_power_paths(alpha, kname):
    kernel = KERNELS[kname]()
    x0 = _draw_gaussian(np.random.default_rng(3), M, S, N)
    state, accs, _ = _run(kernel, make_path(alpha, c=0.7), 1.0, x0, seed=8)
    assert np.all(np.abs(_z_scores_gaussian(state.x, M, S)) < 5.0)
    _assert_moved(x0, state, accs)


@pytest.mark.parametrize("kname", sorted(KERNELS))
def test_mixture_path_is_invariant(kname):
    # arithmetic path α = 1 with c = log Z: γ_τ = (1−τ) N(0, I) + τ N(M, S), exactly
    tau = 0.35
    kernel = KERNELS[kname]()
    x0 = _draw_mixture(np.random.default_rng(21), tau, N)
    state, accs, dens = _run(kernel, make_path(1.0, c=LOGZ), tau, x0, seed=9)
    z = _z_scores_mixture(state.x, tau)
    assert np.all(np.abs(z) < 5.0), z
    _assert_moved(x0, state, accs)
    _assert_cache_consistent(state, dens, kernel.needs_gradient)


@pytest.mark.parametrize(("dense_max_dim", "step"), [(0, 0.8), (150, 1.6)])
def test_hmc_large_step_still_invariant(dense_max_dim, step):
    # with a step size where the Metropolis correction matters (low acceptance); the dense
    # metric whitens the target, so its step sizes are larger for the same acceptance
    tau = 1.0
    kernel = HMC(n_leapfrog=5, dense_max_dim=dense_max_dim)
    x0 = _draw_gaussian(np.random.default_rng(4), M, S, N)
    state, accs, _ = _run(
        kernel, make_path(0.0), tau, x0, seed=10, params_fn=lambda p: with_step_size(p, step)
    )
    assert 0.3 < accs.mean() < 0.8, accs.mean()
    assert np.all(np.abs(_z_scores_gaussian(state.x, M, S)) < 5.0)


@pytest.mark.parametrize(
    "kname,params_fn",
    [("rwmh", None), ("hmc5", lambda p: with_step_size(p, 0.8))],
)
def test_invariance_check_detects_a_broken_kernel(kname, params_fn, monkeypatch):
    """Power of the check above: without the Metropolis correction it must fail."""

    def accept_all(rng, log_ratio):
        return np.ones(log_ratio.shape[0], dtype=bool), 1.0

    kernel = KERNELS[kname]()
    monkeypatch.setattr(sys.modules[type(kernel).__module__], "metropolis_accept", accept_all)
    x0 = _draw_gaussian(np.random.default_rng(4), M, S, N)
    state, _, _ = _run(kernel, make_path(0.0), 1.0, x0, seed=10, params_fn=params_fn)
    assert np.max(np.abs(_z_scores_gaussian(state.x, M, S))) > 5.0


def _imh_small_population_z(n=8, reps=600, steps=5, seed=31):
    """z-score of the mean squared Mahalanobis distance to the target (expected D) of a
    population of ``n`` exact target draws after ``steps`` tuned IMH transitions, over
    ``reps`` independent populations (particles of one population are dependent, so the
    population means are the replicates)."""
    kernel = IndependentMetropolis()
    dens = make_density(gradients=False)
    rng = np.random.default_rng(seed)
    path = make_path(0.0)
    stats = np.empty(reps)
    for r in range(reps):
        state = ParticleState.evaluate(dens, _draw_gaussian(rng, M, S, n), gradient=False)
        for _ in range(steps):
            state, _ = kernel.step(rng, state, dens, path, 1.0, kernel.tune(None, state, None))
        res = state.x - M
        stats[r] = np.mean(np.einsum("ni,ij,nj->n", res, P, res))
    return (stats.mean() - D) / (stats.std(ddof=1) / np.sqrt(reps))


def test_imh_keeps_a_small_population_invariant():
    """Each half moves with a Gaussian fitted to the other half: exact for the target even
    when the fit rests on 4 particles (8 particles, d = 3)."""
    assert abs(_imh_small_population_z()) < 4.0


def test_imh_fitted_to_the_moving_particles_is_not_invariant(monkeypatch):
    """Power of the check above: a proposal fitted to the whole population, the moving
    particle included (what the kernel did before cross-fitting), pulls the population in
    (mean squared Mahalanobis distance 2.1 instead of 3: z ≈ −30)."""
    monkeypatch.setattr(imh_mod, "_halves", lambda state: None)
    assert _imh_small_population_z() < -8.0


def test_imh_halves_follow_families_and_replayed_params_are_fixed():
    k = IndependentMetropolis()
    dens = make_density(gradients=False)
    x = _draw_gaussian(np.random.default_rng(2), M, S, 12)
    state = ParticleState.evaluate(dens, x, gradient=False)
    even, odd = imh_mod._halves(state)
    np.testing.assert_array_equal(even, np.arange(0, 12, 2))
    family = np.array([4, 4, 4, 1, 1, 2, 2, 2, 3, 7, 0, 0])  # copies after resampling
    fam_state = state.with_family(family)
    even, odd = imh_mod._halves(fam_state)
    np.testing.assert_array_equal(even, np.flatnonzero(family % 2 == 0))
    np.testing.assert_array_equal(odd, np.flatnonzero(family % 2 == 1))
    # one family only: the rows' parity; too few particles: no split
    assert len(imh_mod._halves(state.with_family(np.zeros(12, int)))[0]) == 6
    assert imh_mod._halves(state.take(np.arange(3))) is None
    params = k.tune(k.init(fam_state), fam_state, None)
    assert params.cross_fit
    new, info = k.step(np.random.default_rng(0), fam_state, dens, make_path(0.0), 1.0, params)
    np.testing.assert_array_equal(new.family, family)
    _assert_cache_consistent(new, dens, gradient=False)
    # parameters replayed by another run are a fixed proposal: one move with N(mean, L Lᵀ)
    fixed = k.population_params(params)
    assert not fixed.cross_fit and fixed.weights is None
    far = type(fixed)(fixed.mean + 50.0, fixed.chol)
    new, info = k.step(np.random.default_rng(0), state, dens, make_path(0.0), 1.0, far)
    assert info.acceptance_rate < 1e-6 and np.array_equal(new.x, state.x)


def test_imh_moves_particles_at_their_own_levels():
    """Tempered sampling passes one τ per particle: each half takes its rows' τ."""
    k = IndependentMetropolis()
    dens = make_density(gradients=False)
    x = _draw_gaussian(np.random.default_rng(3), M, S, 40)
    state = ParticleState.evaluate(dens, x, gradient=False)
    tau = np.linspace(0.2, 1.0, 40)
    new, info = k.step(
        np.random.default_rng(1),
        state,
        dens,
        ArrayTauPath(make_path(0.0)),
        tau,
        k.tune(k.init(state), state, None),
    )
    assert 0.0 < info.acceptance_rate <= 1.0 and new.n == 40


def test_imh_then_hmc_switches_when_independence_moves_stall():
    """With a bound no IMH transition reaches, HMC takes over after the first transition:
    gradients are evaluated once (N more evaluations), HMC moves from then on, and the
    target stays invariant."""
    k = IMHThenHMC(min_acceptance=0.999, n_leapfrog=5)
    dens = make_density(gradients=True)
    x0 = _draw_gaussian(np.random.default_rng(6), M, S, N)
    state = ParticleState.evaluate(dens, x0, gradient=False).with_family(np.arange(N))
    rng = np.random.default_rng(11)
    path = make_path(0.0)
    params = k.tune(k.init(state), state, None)
    assert params.primary
    state, info = k.step(rng, state, dens, path, 1.0, params)
    assert info.primary and info.n_evals == N and not state.has_gradient
    params = k.tune(params, state, info)
    assert not params.primary
    kinds, evals = [], []
    for _ in range(N_STEPS):
        state, info = k.step(rng, state, dens, path, 1.0, params)
        params = k.tune(params, state, info)
        kinds.append(info.primary)
        evals.append(info.n_evals)
    assert not any(kinds) and state.has_gradient
    assert evals[0] == N * 5 + N and set(evals[1:]) == {N * 5}
    np.testing.assert_array_equal(state.family, np.arange(N))
    assert np.all(np.abs(_z_scores_gaussian(state.x, M, S)) < 5.0)
    _assert_cache_consistent(state, dens, gradient=True)
    assert not k.population_params(params).primary


def test_imh_then_hmc_keeps_independence_moves_that_move():
    k = IMHThenHMC()
    dens = make_density(gradients=False)
    state = ParticleState.evaluate(
        dens, _draw_gaussian(np.random.default_rng(7), M, S, 400), gradient=False
    )
    params = k.tune(k.init(state), state, None)
    for _ in range(5):
        state, info = k.step(np.random.default_rng(1), state, dens, make_path(0.0), 1.0, params)
        params = k.tune(params, state, info)
        assert params.primary and info.primary and info.acceptance_rate > 0.5
    assert (
        k.describe()["kernel"] == "imh_then_hmc"
        and make_kernel("imh_then_hmc").min_acceptance == 0.025
    )
    with pytest.raises(ValueError, match="min_acceptance"):
        IMHThenHMC(min_acceptance=1.0)


def test_final_imh_is_hmc_below_the_target_and_in_a_replay():
    """Below τ = 1 (and with replayed parameters at τ = 1) FinalIMH's transitions are HMC's,
    bit for bit."""
    dens = make_density(gradients=True)
    x0 = _draw_gaussian(np.random.default_rng(8), M, S, 200)
    state = ParticleState.evaluate(dens, x0, gradient=True).with_family(np.arange(200))
    k, h = FinalIMH(n_leapfrog=5), HMC(n_leapfrog=5)
    pk, ph = k.tune(k.init(state), state, None), h.tune(h.init(state), state, None)
    path = make_path(0.0)
    for tau, params, hparams in [(0.4, pk, ph), (1.0, k.population_params(pk), h.population_params(ph))]:
        a, ia = k.step(np.random.default_rng(3), state, dens, path, tau, params)
        b, ib = h.step(np.random.default_rng(3), state, dens, path, tau, hparams)
        np.testing.assert_array_equal(a.x, b.x)
        assert ia == ib
    assert not k.population_params(pk).imh


def test_final_imh_moves_the_target_with_independence_proposals_then_hmc():
    """At τ = 1 independence moves (one evaluation per particle, gradients kept), until a
    transition accepts under ``min_acceptance``; then HMC, with no evaluation to make up."""
    dens = make_density(gradients=True)
    x0 = _draw_gaussian(np.random.default_rng(6), M, S, N)
    state = ParticleState.evaluate(dens, x0, gradient=True).with_family(np.arange(N))
    rng, path = np.random.default_rng(11), make_path(0.0)
    k = FinalIMH(min_acceptance=0.999, n_leapfrog=5)
    params = k.tune(k.init(state), state, None)
    state, info = k.step(rng, state, dens, path, 1.0, params)
    assert info.primary and info.n_evals == N and state.has_gradient
    _assert_cache_consistent(state, dens, gradient=True)
    params = k.tune(params, state, info)
    assert not params.imh
    evals = []
    for _ in range(N_STEPS):
        state, info = k.step(rng, state, dens, path, 1.0, params)
        params = k.tune(params, state, info)
        evals.append(info.n_evals)
        assert not getattr(info, "primary", False)
    assert set(evals) == {N * 5}
    assert np.all(np.abs(_z_scores_gaussian(state.x, M, S)) < 5.0)
    _assert_cache_consistent(state, dens, gradient=True)
    # independence moves that are accepted continue
    k = FinalIMH()
    params = k.tune(k.init(state), state, None)
    for _ in range(3):
        state, info = k.step(rng, state, dens, path, 1.0, params)
        params = k.tune(params, state, info)
        assert info.primary and params.imh and info.acceptance_rate > 0.5
    assert abs(make_kernel("hmc_final_imh").min_acceptance - 0.292) < 1e-3
    assert k.describe()["kernel"] == "hmc_final_imh"
    with pytest.raises(ValueError, match="min_acceptance"):
        FinalIMH(min_acceptance=-0.1)


# --------------------------------------------------------------------------- params


def test_init_and_tune_params():
    x0 = _draw_gaussian(np.random.default_rng(5), M, S, 500)
    dens = make_density()
    state = ParticleState.evaluate(dens, x0, gradient=True)

    rw = RandomWalkMetropolis()
    p = rw.init(state)
    assert p.scale == pytest.approx(2.38 / np.sqrt(D), rel=1e-15)
    np.testing.assert_allclose(p.chol @ p.chol.T, np.cov(x0.T), rtol=0.05, atol=0.02)
    p2 = rw.tune(p, state, KernelInfo(0.5, 500))
    assert p2.scale == pytest.approx(p.scale * np.exp(0.5 - 0.234), rel=1e-12)
    p3 = rw.tune(p, state, KernelInfo(0.0, 500), None)
    assert p3.scale == pytest.approx(p.scale * np.exp(-0.234), rel=1e-12)
    assert rw.tune(p, state, None).scale == p.scale

    hmc = HMC(n_leapfrog=2)
    q = hmc.init(state)
    assert q.step_size == pytest.approx(0.5 * D**-0.25, rel=1e-15)
    np.testing.assert_allclose(q.inv_mass, x0.var(axis=0), rtol=1e-12)
    q2 = hmc.tune(q, state, KernelInfo(0.9, 1000))
    assert q2.step_size == pytest.approx(q.step_size * np.exp(0.9 - 0.7), rel=1e-12)
    assert HMC(step_size=0.123).init(state).step_size == 0.123
    assert with_step_size(q, 0.2).step_size == 0.2


def test_tune_from_weights_uses_weighted_moments():
    x = _draw_gaussian(np.random.default_rng(6), M, S, 300)
    state = ParticleState.evaluate(make_density(), x, gradient=True)
    lw = np.random.default_rng(7).normal(0, 1, 300) - 1e4
    w = np.exp(lw - lw.max())
    w /= w.sum()
    mean = w @ x
    ref_var = w @ (x - mean) ** 2
    q = HMC().tune(HMC().init(state), state, None, lw)
    np.testing.assert_allclose(q.inv_mass, ref_var, rtol=1e-10)
    np.testing.assert_allclose(particle_variance(x, w), ref_var, rtol=1e-12)
    # all weights vanished: falls back to uniform moments rather than failing
    q0 = HMC().tune(HMC().init(state), state, None, np.full(300, -np.inf))
    np.testing.assert_allclose(q0.inv_mass, x.var(axis=0), rtol=1e-12)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("bad", ["nuts", "", 3, None])
def test_make_kernel_unknown(bad):
    with pytest.raises(ValueError, match="unknown"):
        make_kernel(bad)


def test_make_kernel_known():
    assert isinstance(make_kernel("hmc"), HMC)
    assert isinstance(make_kernel("HMC", n_leapfrog=7), HMC)
    assert make_kernel("hmc", n_leapfrog=7).n_leapfrog == 7
    assert isinstance(make_kernel("rwmh"), RandomWalkMetropolis)
    assert isinstance(make_kernel("mh"), RandomWalkMetropolis)
    k = HMC()
    assert make_kernel(k) is k
    with pytest.raises(TypeError):
        make_kernel(k, n_leapfrog=2)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n_leapfrog": 0},
        {"n_leapfrog": 1.5},
        {"step_size": -1.0},
        {"step_size": np.nan},
        {"target_accept": 1.0},
    ],
)
def test_hmc_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        HMC(**kwargs)


def test_rwmh_bad_arguments():
    with pytest.raises(ValueError):
        RandomWalkMetropolis(target_accept=0.0)


def test_hmc_without_gradients_raises_clearly():
    dens = make_density(gradients=False)
    x = np.zeros((5, D))
    with pytest.raises(ValueError, match="no gradients"):
        ParticleState.evaluate(dens, x, gradient=True)
    state = ParticleState.evaluate(dens, x, gradient=False)
    kernel = make_kernel("hmc")
    params = kernel.init(state)
    with pytest.raises(ValueError, match="gradient"):
        kernel.step(np.random.default_rng(0), state, dens, make_path(0.0), 0.5, params)


def test_rwmh_rejects_moves_to_zero_density():
    # a target that is −inf on x0 < 0: particles in the support never leave it
    def log_t(x):
        return np.where(x[:, 0] < 0, -np.inf, _log_target(x))

    dens = FunctionDensity(D, _log_q0, log_t)
    x0 = np.abs(_draw_gaussian(np.random.default_rng(1), np.zeros(D), np.eye(D), 1000))
    state = ParticleState.evaluate(dens, x0, gradient=False)
    kernel = RandomWalkMetropolis()
    params = kernel.init(state)
    rng = np.random.default_rng(2)
    for _ in range(10):
        state, info = kernel.step(rng, state, dens, make_path(0.0), 1.0, params)
        assert 0 < info.acceptance_rate < 1
    assert np.all(state.x[:, 0] >= 0)
    assert np.all(np.isfinite(state.delta))


# ----------------------------------------------------------------------------- per-level hooks
def _population(kernel, n=60, seed=0):
    x = np.random.default_rng(seed).standard_normal((n, D)) * np.array([1.0, 2.0, 0.5])
    dens = FunctionDensity(D, _log_q0, _log_q0, lambda x: -x, lambda x: -x, None)
    return ParticleState.evaluate(dens, x, gradient=kernel.needs_gradient)


@pytest.mark.parametrize("name", ["hmc", "mala", "rwmh", "imh"])
def test_level_params_same_at_every_level(name):
    k = make_kernel(name)
    p = k.init(_population(k))
    lp = k.level_params(p, 4)
    assert lp.n_levels == 4
    levels = np.array([3, 0, 0, 2, 1])
    sel = k.select_level_params(lp, levels)
    if name == "imh":
        assert lp.log_step is None and np.isnan(lp.step_sizes()).all()
        assert sel is p
        return
    step = p.scale if name == "rwmh" else p.step_size
    np.testing.assert_allclose(lp.step_sizes(), step, rtol=1e-15)
    got = sel.scale if name == "rwmh" else sel.step_size
    assert got.shape == (levels.size, 1)
    np.testing.assert_allclose(got[:, 0], step, rtol=1e-15)
    if name in ("hmc", "mala"):
        np.testing.assert_array_equal(sel.inv_mass, np.tile(p.inv_mass, (levels.size, 1)))
    else:
        assert lp.inv_mass is None
        np.testing.assert_array_equal(sel.chol, p.chol)


@pytest.mark.parametrize("name", ["hmc", "mala"])
def test_stack_level_params_step_and_mass(name):
    k = make_kernel(name)
    p0 = k.init(_population(k))
    from dataclasses import replace

    stages = [
        replace(p0, step_size=s, inv_mass=np.full(D, v))
        for s, v in ((0.1, 1.0), (0.2, 2.0), (0.4, 3.0))
    ]
    lp = k.stack_level_params(stages)
    sel = k.select_level_params(lp, np.array([2, 0, 1, 2]))
    np.testing.assert_allclose(sel.step_size[:, 0], [0.4, 0.1, 0.2, 0.4])
    np.testing.assert_allclose(sel.inv_mass[:, 0], [3.0, 1.0, 2.0, 3.0])
    np.testing.assert_allclose(lp.step_sizes(), [0.1, 0.2, 0.4])


def test_stack_level_params_rwmh_rescales_to_the_last_factor():
    """One covariance factor (the last level's); each level's scale keeps its proposal's
    average standard deviation: scale_k · sd(L_k) = scale'_k · sd(L_K)."""
    from pymc_crais.core.kernels import RWMHParams

    k = RandomWalkMetropolis()
    stages = [RWMHParams(s, np.eye(D) * f) for s, f in ((0.5, 4.0), (1.0, 2.0), (2.0, 1.0))]
    lp = k.stack_level_params(stages)
    assert lp.base is stages[-1]
    np.testing.assert_allclose(lp.step_sizes(), [0.5 * 4.0, 1.0 * 2.0, 2.0 * 1.0], rtol=1e-14)
    sel = k.select_level_params(lp, np.array([0, 2]))
    np.testing.assert_allclose(sel.scale[:, 0], [2.0, 2.0], rtol=1e-14)
    np.testing.assert_array_equal(sel.chol, np.eye(D))


@pytest.mark.parametrize(
    ("name", "lo", "hi"), [("hmc", 1e-6, 10.0), ("mala", 1e-6, 10.0), ("rwmh", 1e-5, 1e3)]
)
def test_adapt_level_params_moves_visited_levels_towards_target(name, lo, hi):
    k = make_kernel(name)
    lp = k.level_params(k.init(_population(k)), 4)
    before = lp.log_step.copy()
    levels = np.array([0, 0, 0, 0, 1, 1, 3, 3])
    moved = np.array([1, 1, 1, 1, 0, 0, 1, 0], dtype=bool)
    k.adapt_level_params(lp, levels, moved, 0.1)
    t = k.target_accept
    np.testing.assert_allclose(
        lp.log_step - before, [0.1 * (1 - t), 0.1 * (0 - t), 0.0, 0.1 * (0.5 - t)], atol=1e-15
    )
    for _ in range(2000):  # always accepted: clipped at the upper bound
        k.adapt_level_params(lp, levels, np.ones(8, dtype=bool), 1.0)
    np.testing.assert_allclose(lp.step_sizes()[[0, 1, 3]], hi)
    for _ in range(4000):
        k.adapt_level_params(lp, levels, np.zeros(8, dtype=bool), 1.0)
    np.testing.assert_allclose(lp.step_sizes()[[0, 1, 3]], lo)
    assert lp.step_sizes()[2] == pytest.approx(np.exp(before[2]))  # never visited


def test_adapt_level_params_imh_keeps_its_parameters():
    k = make_kernel("imh")
    p = k.init(_population(k))
    lp = k.level_params(p, 3)
    k.adapt_level_params(lp, np.array([0, 1]), np.array([True, False]), 0.1)
    assert k.select_level_params(lp, np.array([0, 1, 2])) is p


def test_kernel_without_level_hooks_raises_a_clear_error():
    class Plain(kernels_mod.MutationKernel):
        def init(self, state):
            return None

        def tune(self, params, state, info, log_weights=None):
            return None

        def step(self, rng, state, density, path, tau, params):
            return state, KernelInfo(1.0, state.n)

    k = Plain()
    for call in (
        lambda: k.level_params(None, 3),
        lambda: k.stack_level_params([None]),
        lambda: k.select_level_params(None, np.zeros(2, dtype=int)),
        lambda: k.adapt_level_params(None, None, None, 0.1),
    ):
        with pytest.raises(NotImplementedError, match="Plain does not implement .*level_params"):
            call()
