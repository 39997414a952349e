"""Population moments the kernels are tuned from: variances (also leave-one-out),
covariances and their Cholesky factors (also cross-fitted between the two halves of the
population), so that no particle's proposal depends on its own position
(docs/algorithms.md, "Adaptation bias")."""

from __future__ import annotations

import numpy as np

from ..weights import normalized_weights

__all__ = [
    "apply_by_half",
    "cholesky",
    "cross_fitted_chol",
    "floor_variance",
    "moments_weights",
    "particle_covariance",
    "particle_variance",
    "particle_variance_loo",
    "split_halves",
]


def moments_weights(log_weights: np.ndarray | None) -> np.ndarray | None:
    if log_weights is None:
        return None
    try:
        return normalized_weights(log_weights)
    except FloatingPointError:
        return None


def floor_variance(var: np.ndarray) -> np.ndarray:
    """Variances floored at ``1e-10`` times their mean (and above 0)."""
    scale = max(float(np.mean(var)), 1e-12)
    return np.maximum(var, 1e-10 * scale + 1e-300)


def particle_variance(x: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Per-coordinate (weighted) variance of the particles, floored by :func:`floor_variance`."""
    if weights is None:
        var = x.var(axis=0)
    else:
        mean = weights @ x
        var = weights @ (x - mean) ** 2
    return floor_variance(var)


def particle_variance_loo(x: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Leave-one-out (weighted) per-coordinate variances, shape ``(N, d)``.

    Row ``i`` is :func:`particle_variance` of the population without particle ``i`` (the
    other weights renormalized), so that a kernel using row ``i`` to move particle ``i``
    does not depend on that particle's position. Closed form, ``O(N d)``. A particle that
    holds nearly all the weight (``1 − W_i < 10⁻³``) gets the unweighted leave-one-out row.
    """
    n = x.shape[0]
    if n < 3:
        return np.tile(particle_variance(x, weights), (n, 1))

    def loo(w):
        # without particle i: mean shifts by −W_i c_i / (1 − W_i), c the centred positions
        c = x - w @ x
        var = w @ (c * c)
        rest = np.maximum(1.0 - w, 1e-3)[:, None]
        wc = w[:, None] * c
        return (var - wc * c) / rest - (wc / rest) ** 2

    out = loo(np.full(n, 1.0 / n))
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        out = np.where((1.0 - w > 1e-3)[:, None], loo(w), out)
    scale = max(float(np.mean(particle_variance(x, weights))), 1e-12)
    return np.maximum(out, 1e-10 * scale + 1e-300)


def split_halves(x: np.ndarray, weights: np.ndarray | None, groups: np.ndarray | None = None):
    """The two halves (even / odd rows, or ``groups`` 0 / 1) of the population with
    renormalized weights."""
    out = []
    rows = (slice(0, None, 2), slice(1, None, 2)) if groups is None else (groups == 0, groups == 1)
    for sl in rows:
        w = None
        if weights is not None:
            w = np.asarray(weights[sl], dtype=np.float64)
            total = w.sum()
            w = w / total if total > 0 and np.isfinite(total) else None
        out.append((x[sl], w))
    return out


def cross_fitted_chol(
    x: np.ndarray, weights: np.ndarray | None, groups: np.ndarray | None = None
) -> np.ndarray | None:
    """Cholesky factors ``(2, d, d)``: [0] from the odd rows (moves the even ones), [1] from
    the even rows; with ``groups`` (0 / 1 per row), [g] from the rows of group ``1 − g``.
    ``None`` when a half has fewer than 2 rows."""
    (xe, we), (xo, wo) = split_halves(x, weights, groups)
    if min(xe.shape[0], xo.shape[0]) < 2:
        return None
    return np.stack([cholesky(particle_covariance(xo, wo)), cholesky(particle_covariance(xe, we))])


def apply_by_half(z: np.ndarray, mats: np.ndarray, groups: np.ndarray | None = None) -> np.ndarray:
    """``z[i] @ mats[i % 2].T`` (or ``mats[groups[i]]``) for every row (two matrix products)."""
    out = np.empty_like(z)
    rows = (slice(0, None, 2), slice(1, None, 2)) if groups is None else (groups == 0, groups == 1)
    out[rows[0]] = z[rows[0]] @ mats[0].T
    out[rows[1]] = z[rows[1]] @ mats[1].T
    return out


def particle_covariance(x: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """(Weighted) covariance of the particles, regularized to be positive definite."""
    n, d = x.shape
    if weights is None:
        mean = x.mean(axis=0)
        xc = x - mean
        cov = xc.T @ xc / max(n - 1, 1)
    else:
        mean = weights @ x
        xc = x - mean
        cov = (xc * weights[:, None]).T @ xc
    # Shrink towards the diagonal when few particles support the estimate (N < ~2d).
    diag = np.diag(np.diag(cov))
    lam = min(1.0, d / max(n, 1))
    cov = (1.0 - 0.5 * lam) * cov + 0.5 * lam * diag
    jitter = 1e-10 * max(float(np.mean(np.diag(cov))), 1e-300)
    return cov + jitter * np.eye(d)


def cholesky(cov: np.ndarray) -> np.ndarray:
    d = cov.shape[0]
    jitter = 1e-10 * max(float(np.mean(np.diag(cov))), 1e-300)
    for _ in range(12):
        try:
            return np.linalg.cholesky(cov)
        except np.linalg.LinAlgError:
            cov = cov + jitter * np.eye(d)
            jitter *= 10.0
    return np.diag(np.sqrt(np.maximum(np.diag(cov), 1e-300)))
