"""Scale moves (core/kernels/scale_moves.py): the orbit they learn on a funnel, the
invariance of the target under them (and the power of that check), and HMC's dense-metric
rule above ``dense_max_dim``."""

from __future__ import annotations

import numpy as np
import pytest

import pymc_crais.core.kernels.scale_moves as sm
from pymc_crais.core.density import FunctionDensity
from pymc_crais.core.kernels import HMC
from pymc_crais.core.kernels.hmc import HMCInfo
from pymc_crais.core.kernels.imh import FinalIMH
from pymc_crais.core.particles import ParticleState
from pymc_crais.core.paths import make_path

K = 8  # coordinates scaled by the neck
D = K + 1
SD_V = 1.5
N = 4000


def _log_q0(x):
    return -0.5 * np.sum(x * x, axis=1)


def _log_funnel(x):
    """Neal's funnel: v ~ N(0, 1.5²), x_j | v ~ N(0, e^v)."""
    v = x[:, 0]
    return -0.5 * (v / SD_V) ** 2 - 0.5 * K * v - 0.5 * np.sum(x[:, 1:] ** 2, axis=1) * np.exp(-v)


def _grad_funnel(x):
    v = x[:, :1]
    s2 = np.sum(x[:, 1:] ** 2, axis=1, keepdims=True) * np.exp(-v)
    return np.concatenate([-v / SD_V**2 - 0.5 * K + 0.5 * s2, -x[:, 1:] * np.exp(-v)], axis=1)


def _density():
    return FunctionDensity(D, _log_q0, _log_funnel, lambda x: -x, _grad_funnel)


def _draws(rng, n=N):
    v = rng.normal(0.0, SD_V, n)
    return np.column_stack([v, rng.standard_normal((n, K)) * np.exp(v / 2)[:, None]])


def _run_moves(seed, steps=15):
    rng = np.random.default_rng(seed)
    dens = _density()
    x0 = _draws(rng)
    state = ParticleState.evaluate(dens, x0, gradient=True)
    moves = sm.fit_scale_moves(state.x, None)
    accs = []
    for _ in range(steps):
        state, acc, n_evals = sm.scale_move_step(rng, state, dens, make_path(0.0), 1.0, moves)
        assert n_evals == N * moves.n_moves
        accs.append(acc)
    return x0, state, np.array(accs), dens


def _z_neck(x):
    """z-scores of the mean and variance of the neck coordinate v (exactly N(0, SD_V²))."""
    v = x[:, 0]
    return np.array(
        [v.mean() / (SD_V / np.sqrt(N)), (v.var(ddof=1) - SD_V**2) / (SD_V**2 * np.sqrt(2 / N))]
    )


def test_fit_finds_the_neck_and_its_slopes():
    moves = sm.fit_scale_moves(_draws(np.random.default_rng(3)), None)
    for h in (0, 1):
        assert moves.coords[h][0] == 0
        block = moves.slopes[h][0][1:]
        # log |x_j| = v / 2 + log |z|: slope 1/2 on every scaled coordinate
        np.testing.assert_allclose(block, 0.5, atol=0.1)
        assert moves.slopes[h][0][0] == 0.0


def test_no_moves_on_a_gaussian():
    x = np.random.default_rng(4).standard_normal((N, D)) @ np.diag(np.linspace(0.5, 2, D))
    assert sm.fit_scale_moves(x, None) is None
    assert sm.fit_scale_moves(x[:, :2], None) is None  # d < 3


def test_scale_moves_leave_the_funnel_invariant_and_move_its_neck():
    x0, state, accs, dens = _run_moves(seed=5)
    assert np.all(np.abs(_z_neck(state.x)) < 5.0), _z_neck(state.x)
    assert accs.mean() > 0.2, accs
    assert np.corrcoef(x0[:, 0], state.x[:, 0])[0, 1] < 0.5
    ev = ParticleState.evaluate(dens, state.x, gradient=True)
    np.testing.assert_array_equal(state.delta, ev.delta)
    np.testing.assert_array_equal(state.grad_delta, ev.grad_delta)


def test_invariance_check_detects_a_kernel_without_its_correction(monkeypatch):
    """Power of the check above: accepting every proposal (no Metropolis ratio, no
    Jacobian) moves the neck's distribution."""

    def accept_all(rng, log_ratio):
        return np.ones(log_ratio.shape[0], dtype=bool), 1.0

    monkeypatch.setattr(sm, "metropolis_accept", accept_all)
    _, state, _, _ = _run_moves(seed=5)
    assert np.max(np.abs(_z_neck(state.x))) > 5.0


def test_wrong_slopes_cost_acceptance_not_invariance():
    rng = np.random.default_rng(8)
    dens = _density()
    state = ParticleState.evaluate(dens, _draws(rng), gradient=True)
    fit = sm.fit_scale_moves(state.x, None)
    wrong = sm.ScaleMoves(
        fit.coords, tuple(2.0 * s for s in fit.slopes), fit.center, fit.sigma, 0.0
    )
    accs = []
    for _ in range(15):
        state, acc, _ = sm.scale_move_step(rng, state, dens, make_path(0.0), 1.0, wrong)
        accs.append(acc)
    assert np.all(np.abs(_z_neck(state.x)) < 5.0), _z_neck(state.x)
    assert np.mean(accs) > 0.0


def test_hmc_with_scale_moves_reports_and_adapts_their_acceptance():
    rng = np.random.default_rng(7)
    dens = _density()
    kernel = HMC(n_leapfrog=3, scale_moves=True)
    state = ParticleState.evaluate(dens, _draws(rng), gradient=True)
    params = kernel.tune(kernel.init(state), state, None)
    assert params.scale is not None and params.scale.log_c == 0.0
    state, info = kernel.step(rng, state, dens, make_path(0.0), 1.0, params)
    assert isinstance(info, HMCInfo) and np.isfinite(info.scale_acceptance)
    assert info.n_evals == N * (3 + params.scale.n_moves)
    tuned = kernel.tune(params, state, info)
    assert tuned.scale.log_c == pytest.approx(info.scale_acceptance - sm.TARGET_ACCEPT)
    assert kernel.population_params(tuned).scale is None  # cross-fitted: not replayed
    assert FinalIMH(scale_moves=True).hmc.scale_moves and not HMC().scale_moves


@pytest.mark.parametrize(
    ("d", "n", "dense_max_dim", "dense"),
    [(100, 10, 150, True), (302, 2000, 150, True), (302, 1000, 150, False),
     (152, 1000, 150, True), (1200, 10_000, 150, False), (5, 2000, 0, False)],
)  # fmt: skip
def test_dense_metric_rule(d, n, dense_max_dim, dense):
    assert HMC(dense_max_dim=dense_max_dim).dense_for(d, n) is dense


@pytest.mark.parametrize(("n", "dense"), [(700, True), (600, False)])
def test_tune_uses_the_dense_rule_above_dense_max_dim(n, dense):
    d = 160
    x = np.random.default_rng(9).standard_normal((n, d))
    dens = FunctionDensity(
        d,
        lambda x: -0.5 * np.sum(x * x, 1),
        lambda x: -0.5 * np.sum(x * x, 1),
        lambda x: -x,
        lambda x: -x,
    )
    state = ParticleState.evaluate(dens, x, gradient=True)
    params = HMC().tune(HMC().init(state), state, None)
    assert (params.split_chol is not None) is dense
    assert (params.particle_inv_mass is None) is dense
