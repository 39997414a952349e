"""The latent block's Hessian by finite differences of the batched gradient, compressed where
it is sparse.

:func:`~pymc_crais.core.conditional_laplace.latent_newton` needs ``H(θ, x) = ∂²/∂x² log
p(θ, x, y)`` at every Newton step of every ``θ`` draw. A forward difference of the gradient
costs one evaluation per latent coordinate and one at ``x``: ``d_x + 1`` points a ``θ``. Most
latent blocks users write have a sparse Hessian: independent random effects a diagonal one, a
random walk or an AR(1) a tridiagonal one. Columns of ``H`` that share no non-zero row can be
perturbed together (Curtis, Powell & Reid 1974): each row of one perturbed gradient then
belongs to a single column of the group. A greedy colouring of the columns (two columns
conflict when some row is non-zero in both) gives the groups; a tridiagonal ``H`` needs 3,
a diagonal one 1, so ``c + 1`` points replace ``d_x + 1``.

The pattern (:func:`latent_sparsity`) is measured once per model, as the union of the
non-zero entries of full finite-difference Hessians at a few points (more than one, so
that an entry that vanishes at one ``θ``, such as an AR coefficient of 0, is not taken for a
structural zero); entries at most ``rtol`` of ``√|H_ii H_jj|`` are zero. Where the colouring
would save less than half the points the Hessian stays dense (``None``). A wrong pattern can
only make the Hessian, and so the proposal, worse: the proposal's density is exact at its
draws whatever ``H`` was, so the importance weights stay exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .density import BatchedDensity

__all__ = [
    "LatentSparsity",
    "hessian_from_gradients",
    "hessian_points",
    "joined_hessian_points",
    "latent_sparsity",
]

RTOL = 1e-6
"""Entries of a measured Hessian at most this times ``√|H_ii H_jj|`` are zeros of the pattern."""


@dataclass(frozen=True)
class LatentSparsity:
    """The non-zero pattern ``mask`` (``d_x × d_x``, symmetric) of the latent Hessian and a
    colouring ``colors`` of its columns in which no two columns of one colour share a
    non-zero row."""

    mask: np.ndarray
    colors: np.ndarray

    @property
    def n_colors(self) -> int:
        return int(self.colors.max()) + 1


def joined_hessian_points(blocks, theta: np.ndarray, x: np.ndarray, h: np.ndarray, sparsity):
    """:func:`hessian_points` joined with each row's ``θ``: ``(M, k + 1, d)``."""
    pts = hessian_points(x, h, sparsity)
    return blocks.join(np.repeat(theta[:, None, :], pts.shape[1], axis=1), pts)


def hessian_points(x: np.ndarray, h: np.ndarray, sparsity: LatentSparsity | None) -> np.ndarray:
    """``(M, k + 1, d_x)``: each row's ``x`` and its ``k`` perturbed copies (one a column
    where dense, ``k = d_x``; one a colour, every column of the colour moved by its ``h``)."""
    m, dx = x.shape
    k = dx if sparsity is None else sparsity.n_colors
    pts = np.repeat(x[:, None, :], k + 1, axis=1)
    idx = np.arange(dx)
    group = idx if sparsity is None else sparsity.colors
    pts[:, group + 1, idx] += h
    return pts


def hessian_from_gradients(
    g: np.ndarray, h: np.ndarray, sparsity: LatentSparsity | None
) -> np.ndarray:
    """The symmetrized Hessian rows ``(M, d_x, d_x)`` from the latent gradients ``g`` at the
    points of :func:`hessian_points` (``(M, k + 1, d_x)``)."""
    diff = g[:, 1:] - g[:, :1]
    if sparsity is None:
        hess = diff / h[:, :, None]
    else:
        hess = np.where(sparsity.mask, diff[:, sparsity.colors] / h[:, :, None], 0.0)
    return 0.5 * (hess + np.swapaxes(hess, 1, 2))


def latent_sparsity(
    density: BatchedDensity,
    blocks,
    points: np.ndarray,
    *,
    fd_step: float = 1e-4,
    rtol: float = RTOL,
) -> LatentSparsity | None:
    """The pattern and colouring of the latent Hessian from full finite-difference Hessians
    at ``points`` (rows of the full coordinates, at least two with finite gradients, else
    ``None``); ``None`` too where the colours would save less than half the points."""
    points = np.atleast_2d(np.asarray(points, dtype=np.float64))
    x = points[:, blocks.latent]
    dx = x.shape[1]
    h = fd_step * np.maximum(1.0, np.abs(x))
    full = joined_hessian_points(blocks, points[:, blocks.hyper], x, h, None)
    with np.errstate(all="ignore"):
        ev = density.evaluate_grouped(full, blocks.latent)
        lp, grad = ev.log_q0 + ev.delta, ev.grad_log_q0 + ev.grad_delta
    finite = np.all(np.isfinite(grad), axis=(1, 2)) & np.all(np.isfinite(lp), axis=1)
    if finite.sum() < 2:
        return None
    hess = hessian_from_gradients(grad[finite], h[finite], None)
    diag = np.abs(np.diagonal(hess, axis1=1, axis2=2))
    scale = np.sqrt(diag[:, :, None] * diag[:, None, :])
    mask = np.any(np.abs(hess) > rtol * scale, axis=0) | np.eye(dx, dtype=bool)
    conflict = (mask.astype(np.int64).T @ mask.astype(np.int64)) > 0
    colors = np.full(dx, -1)
    for j in range(dx):  # greedy: the smallest colour no conflicting column has
        taken = set(colors[conflict[j]].tolist())
        colors[j] = next(c for c in range(dx) if c not in taken)
    if 2 * (colors.max() + 2) > dx + 1:
        return None
    return LatentSparsity(mask, colors)
