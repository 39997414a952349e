"""The conditional-Laplace proposal (core/conditional_laplace.py) on a hierarchical Gaussian
model whose evidence is a one-dimensional integral: ``u = log τ ~ N(0, 1)``,
``x_j | u ~ N(0, τ²)``, ``y_j | x_j ~ N(x_j, 1)``. Given ``u`` the latent block is exactly
Gaussian, so the Newton fit, the Laplace marginal and the weights can be checked against
closed forms."""

import numpy as np
import pytest
from scipy import integrate, optimize, stats

from pymc_crais.core.anneal import anneal
from pymc_crais.core.conditional_laplace import (
    Blocks,
    ConditionalLaplace,
    WeightedStart,
    fit_hyper,
    laplace_marginal,
    latent_newton,
)
from pymc_crais.core.density import FunctionDensity
from pymc_crais.core.estimators import ancestry_variance
from pymc_crais.core.initial import StudentTInitial
from pymc_crais.core.kernels import make_kernel
from pymc_crais.core.paths import make_path
from pymc_crais.core.schedules import FixedSchedule

Y = np.array([1.8, -0.4, 2.9, 0.6, 1.2, -1.5, 2.2, 0.1])
J = Y.size
BLOCKS = Blocks(np.array([0]), np.arange(1, J + 1))


def log_target(z):
    u, x = z[:, 0], z[:, 1:]
    tau2 = np.exp(2 * u)
    prior_x = -0.5 * np.sum(x**2, axis=1) / tau2 - 0.5 * J * np.log(2 * np.pi * tau2)
    lik = -0.5 * np.sum((Y - x) ** 2, axis=1) - 0.5 * J * np.log(2 * np.pi)
    return stats.norm.logpdf(u) + prior_x + lik


def grad_target(z):
    u, x = z[:, 0], z[:, 1:]
    tau2 = np.exp(2 * u)
    gu = -u + np.sum(x**2, axis=1) / tau2 - J
    gx = -x / tau2[:, None] + (Y - x)
    return np.column_stack([gu, gx])


def density():
    d = J + 1
    return FunctionDensity(
        d,
        log_q0=lambda z: stats.norm.logpdf(z).sum(axis=1),
        log_target=log_target,
        grad_log_q0=lambda z: -z,
        grad_log_target=grad_target,
    )


def exact_marginal(u):
    return stats.norm.logpdf(u) + stats.norm.logpdf(Y[:, None], 0, np.sqrt(1 + np.exp(2 * u))).sum(
        0
    )


LOG_Z = float(np.log(integrate.quad(lambda u: np.exp(exact_marginal(np.array([u]))[0]), -8, 8)[0]))


def test_newton_finds_the_conditional_mode_and_precision_of_a_gaussian_block():
    u = np.array([[-0.5], [0.0], [0.9]])
    fit = latent_newton(density(), BLOCKS, u, np.zeros((3, J)))
    tau2 = np.exp(2 * u)
    np.testing.assert_allclose(fit.x, Y * tau2 / (1 + tau2), atol=1e-7)
    prec = fit.chol @ np.swapaxes(fit.chol, 1, 2)
    for i in range(3):
        np.testing.assert_allclose(prec[i], np.eye(J) * (1 / tau2[i, 0] + 1), rtol=1e-5)
    assert fit.n_iter == 1  # a quadratic: one step, where the gradient vanishes


def test_the_laplace_marginal_is_exact_for_a_gaussian_block():
    u = np.linspace(-1.0, 1.5, 6)[:, None]
    value, _ = laplace_marginal(density(), BLOCKS, u, np.zeros(J))
    np.testing.assert_allclose(value, exact_marginal(u[:, 0]), atol=1e-6)


def test_the_hyperparameter_fit_is_the_marginal_mode_and_curvature():
    fit = fit_hyper(density(), BLOCKS, np.zeros(1), np.zeros(J))
    best = optimize.minimize_scalar(lambda u: -exact_marginal(np.array([u]))[0], bounds=(-3, 3),
                                    method="bounded", options={"xatol": 1e-8})  # fmt: skip
    assert fit.problem is None
    assert abs(fit.mode[0] - best.x) < 1e-3
    h = 1e-4
    curv = (exact_marginal(best.x + np.array([h, 0.0, -h])) @ np.array([1.0, -2.0, 1.0])) / h**2
    np.testing.assert_allclose(fit.cov[0, 0], -1.0 / curv, rtol=1e-2)
    assert fit.n_evals > 0


def test_a_flat_marginal_is_a_problem_not_a_fit():
    d = J + 1
    flat = FunctionDensity(d, log_q0=lambda z: np.zeros(len(z)),
                           log_target=lambda z: -0.5 * np.sum(z[:, 1:] ** 2, axis=1),
                           grad_log_q0=lambda z: np.zeros_like(z),
                           grad_log_target=lambda z: np.column_stack([np.zeros(len(z)), -z[:, 1:]]))  # fmt: skip
    assert "Hessian" in fit_hyper(flat, BLOCKS, np.zeros(1), np.zeros(J)).problem


def test_the_draws_carry_their_exact_log_density_in_families():
    dens = density()
    t = StudentTInitial(np.array([0.3]), np.array([[0.2]]), df=5.0)
    cl = ConditionalLaplace(BLOCKS, t, np.zeros(J), copies=4)
    start = cl.draw(np.random.default_rng(1), 10, dens)
    assert start.x.shape == (10, J + 1) and start.n_evals == dens.n_evals > 0
    np.testing.assert_array_equal(start.family, np.repeat(np.arange(5), 2))  # 10 = 5 × 2
    u = start.x[:, 0]
    tau2 = np.exp(2 * u)
    mean = Y * (tau2 / (1 + tau2))[:, None]
    sd = np.sqrt(1 / (1 / tau2 + 1))[:, None]
    expected = t.logpdf(start.x[:, :1]) + stats.norm.logpdf(start.x[:, 1:], mean, sd).sum(1)
    np.testing.assert_allclose(start.log_q0, expected, atol=1e-6)
    # the copies of an exact conditional carry one weight (up to the Hessian's rounding)
    lw = log_target(start.x) - start.log_q0
    assert np.ptp(lw[:2]) < 1e-6


def test_the_ancestry_variance_counts_families_drawn_together():
    lw = np.log(np.array([1.0, 1.0, 3.0, 3.0]))
    # two families of two: normalized family weights 1/4, 3/4 -> S = 10/16, V = S - 1/2
    assert ancestry_variance(lw, np.array([0, 0, 1, 1]), 0, n_families=2) == pytest.approx(
        10 / 16 - 0.5
    )
    assert ancestry_variance(lw, np.arange(4), 0, n_families=None) == pytest.approx(
        (1 + 1 + 9 + 9) / 64 - 0.25
    )
    with pytest.raises(ValueError, match="without resampling"):
        ancestry_variance(lw, np.array([0, 0, 1, 1]), 1, n_families=2)


def _one_stage(seed, schedule=None):
    dens = density()
    fit = fit_hyper(dens, BLOCKS, np.zeros(1), np.zeros(J))
    cl = ConditionalLaplace(
        BLOCKS, StudentTInitial(fit.mode, fit.cov * 1.44, df=5.0), fit.x_at_mode, 4
    )
    rng = np.random.default_rng(seed)
    start = cl.draw(rng, 800, dens)
    sched = schedule or FixedSchedule(np.array([0.0, 1.0]))
    return anneal(
        rng, dens, start, make_path(0.0), sched, make_kernel("hmc"), n_mcmc_steps=2
    ), start


def test_one_importance_stage_from_the_start_is_right_within_its_error():
    z = []
    for seed in range(4):
        res, start = _one_stage(seed)
        assert len(res.stages["tau"]) == 1 and res.n_logp_evals > start.n_evals
        z.append((res.log_marginal_likelihood - LOG_Z) / np.sqrt(res.log_z_variance))
    assert np.all(np.abs(z) < 4), z


def test_a_weighted_start_refuses_a_schedule_that_stops_before_one():
    with pytest.raises(ValueError, match="one-step schedule"):
        _one_stage(0, FixedSchedule(np.array([0.0, 0.5, 1.0])))


def test_weighted_start_is_a_plain_record():
    s = WeightedStart(np.zeros((2, 3)), np.zeros(2), np.array([0, 0]))
    assert s.n_evals == 0
