"""The latent Hessian's pattern and column colouring (core/latent_hessian.py): fewer gradient
points a Newton step where the latent Hessian is sparse, the same Newton fit."""

import numpy as np
import pytest

from pymc_crais.core.conditional_laplace import Blocks, latent_newton
from pymc_crais.core.density import FunctionDensity
from pymc_crais.core.latent_hessian import (
    hessian_from_gradients,
    hessian_points,
    latent_sparsity,
)

N = 12
BLOCKS = Blocks(np.array([0]), np.arange(1, N + 1))
Y = np.sin(np.arange(N))


def ar1_density():
    """θ = ρ, x an AR(1) path observed with unit noise: a tridiagonal latent Hessian whose
    off-diagonal ρ vanishes at ρ = 0."""

    def logp(z):
        rho, x = z[:, :1], z[:, 1:]
        innov = x[:, 1:] - rho * x[:, :-1]
        sq = x[:, 0] ** 2 + np.sum(innov**2, 1) + np.sum((Y - x) ** 2, 1)
        return -0.5 * (sq + rho[:, 0] ** 2)

    def grad(z):
        rho, x = z[:, :1], z[:, 1:]
        innov = x[:, 1:] - rho * x[:, :-1]
        gx = (Y - x).copy()
        gx[:, 0] -= x[:, 0]
        gx[:, 1:] -= innov
        gx[:, :-1] += rho * innov
        grho = np.sum(innov * x[:, :-1], 1) - rho[:, 0]
        return np.column_stack([grho, gx])

    zero = lambda z: np.zeros(len(z))  # noqa: E731
    return FunctionDensity(N + 1, log_q0=zero, log_target=logp, grad_log_q0=np.zeros_like,
                           grad_log_target=grad)  # fmt: skip


def test_a_tridiagonal_hessian_takes_three_colours_from_points_where_it_is_not_diagonal():
    dens = ar1_density()
    rng = np.random.default_rng(0)
    at_zero = np.zeros((1, N + 1))  # ρ = 0: the Hessian is diagonal there
    assert latent_sparsity(dens, BLOCKS, np.vstack([at_zero, at_zero])).n_colors == 1
    points = np.vstack([at_zero, rng.normal(size=(2, N + 1))])
    sp = latent_sparsity(dens, BLOCKS, points)
    assert sp.n_colors == 3
    band = np.abs(np.subtract.outer(np.arange(N), np.arange(N))) <= 1
    np.testing.assert_array_equal(sp.mask, band)
    # no two columns of one colour share a non-zero row
    for c in range(sp.n_colors):
        assert (sp.mask[:, sp.colors == c].sum(axis=1) <= 1).all()
    # the compressed Hessian is the dense one
    x = rng.normal(size=(4, N))
    h = 1e-4 * np.maximum(1.0, np.abs(x))
    theta = rng.normal(size=(4, 1))
    hessians = []
    for s in (None, sp):
        pts = hessian_points(x, h, s)
        full = BLOCKS.join(np.repeat(theta[:, None, :], pts.shape[1], axis=1), pts)
        ev = dens.evaluate(full.reshape(-1, N + 1), gradient=True)
        g = (ev.grad_log_q0 + ev.grad_delta).reshape(4, pts.shape[1], N + 1)[:, :, 1:]
        hessians.append(hessian_from_gradients(g, h, s))
    assert hessians[1].shape == (4, N, N)
    np.testing.assert_allclose(hessians[1], hessians[0], atol=1e-9)


def test_newton_with_the_colouring_gives_the_dense_fit_for_fewer_evaluations():
    dens = ar1_density()
    rng = np.random.default_rng(1)
    sp = latent_sparsity(dens, BLOCKS, rng.normal(size=(3, N + 1)))
    theta = rng.uniform(-0.8, 0.8, size=(5, 1))
    fits, evals = [], []
    for s in (None, sp):
        before = dens.n_evals
        fits.append(latent_newton(dens, BLOCKS, theta, np.zeros((5, N)), sparsity=s))
        evals.append(dens.n_evals - before)
    np.testing.assert_allclose(fits[1].x, fits[0].x, atol=1e-8)
    np.testing.assert_allclose(fits[1].chol, fits[0].chol, atol=1e-6)
    # one Hessian and one trial step a row (the target is quadratic in x)
    assert evals == [5 * (N + 2), 5 * (sp.n_colors + 2)]


def test_a_dense_hessian_or_too_few_finite_points_stay_dense():
    def logp(z):
        x = z[:, 1:]
        return -0.5 * np.sum(x, 1) ** 2 - 0.5 * np.sum(x**2, 1)

    def grad(z):
        x = z[:, 1:]
        return np.column_stack([np.zeros(len(z)), -np.sum(x, 1)[:, None] - x])

    zero = lambda z: np.zeros(len(z))  # noqa: E731
    dense = FunctionDensity(N + 1, log_q0=zero, log_target=logp, grad_log_q0=np.zeros_like,
                            grad_log_target=grad)  # fmt: skip
    rng = np.random.default_rng(2)
    assert latent_sparsity(dense, BLOCKS, rng.normal(size=(2, N + 1))) is None
    bad = rng.normal(size=(2, N + 1))
    bad[1, 3] = np.nan
    assert latent_sparsity(ar1_density(), BLOCKS, bad) is None


@pytest.mark.parametrize("n_colors", [1, 3])
def test_hessian_points_move_every_column_of_a_colour_together(n_colors):
    from pymc_crais.core.latent_hessian import LatentSparsity

    colors = np.arange(N) % n_colors
    sp = LatentSparsity(np.eye(N, dtype=bool), colors)
    x = np.zeros((2, N))
    pts = hessian_points(x, np.full((2, N), 0.5), sp)
    assert pts.shape == (2, n_colors + 1, N)
    np.testing.assert_array_equal(pts[:, 0], 0.0)
    for c in range(n_colors):
        np.testing.assert_array_equal(pts[0, c + 1], np.where(colors == c, 0.5, 0.0))
