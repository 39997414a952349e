"""Log-space weight helpers: normalization, effective sample size, log-mean-exp.

Every function here accepts ``-inf`` entries (particles with zero weight) and never
emits a floating-point warning for them. ``NaN`` log-weights are treated as ``-inf``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp as _scipy_logsumexp

__all__ = [
    "clean_log_weights",
    "ess",
    "ess_from_log_weights",
    "log_mean_exp",
    "log_z_relative_variance",
    "logsumexp",
    "normalize_log_weights",
    "normalized_weights",
]


def clean_log_weights(log_weights: np.ndarray) -> np.ndarray:
    """Return a float64 copy of ``log_weights`` with NaN and ``+inf`` mapped to ``-inf``.

    A log-weight of ``+inf`` or NaN can only come from a non-finite log-density; such a
    particle gets zero weight (``-inf``) rather than poisoning the estimate.

    Parameters
    ----------
    log_weights : array_like
        Unnormalized log-weights.

    Returns
    -------
    numpy.ndarray
        Cleaned log-weights.
    """
    lw = np.array(log_weights, dtype=np.float64, copy=True)
    lw[~np.isfinite(lw)] = -np.inf
    return lw


def logsumexp(a: np.ndarray, axis: int | None = None) -> np.ndarray | float:
    """``log(sum(exp(a)))`` by :func:`scipy.special.logsumexp`, as a float for ``axis=None``.

    The one implementation in the package is SciPy's; this adapter only fixes the return
    type and the empty case. ``-inf`` entries contribute zero, and all ``-inf`` gives
    ``-inf`` without a warning.

    Parameters
    ----------
    a : array_like
        Values in log space; ``-inf`` entries contribute zero.
    axis : int, optional
        Axis to reduce over; all entries when ``None``.

    Returns
    -------
    float or numpy.ndarray
        The reduction.
    """
    a = np.asarray(a, dtype=np.float64)
    if a.size == 0:  # the sum of no terms (SciPy cannot reduce an empty axis of a 2-D array)
        out = np.full(np.sum(a, axis=axis).shape, -np.inf)
    else:
        out = _scipy_logsumexp(a, axis=axis)
    return float(out) if axis is None else out


def log_mean_exp(a: np.ndarray, axis: int | None = None) -> np.ndarray | float:
    """Stable ``log(mean(exp(a)))``.

    Parameters
    ----------
    a : array_like
        Values in log space.
    axis : int, optional
        Axis to reduce over; all entries when ``None``.

    Returns
    -------
    float or numpy.ndarray
        The reduction.
    """
    a = np.asarray(a, dtype=np.float64)
    n = a.size if axis is None else a.shape[axis]
    return logsumexp(a, axis=axis) - np.log(n)


def normalize_log_weights(log_weights: np.ndarray) -> np.ndarray:
    """Return log-weights shifted so that ``sum(exp(.)) == 1``.

    Parameters
    ----------
    log_weights : array_like
        Unnormalized log-weights (``-inf`` allowed, NaN treated as ``-inf``).

    Returns
    -------
    numpy.ndarray
        Normalized log-weights.

    Raises
    ------
    FloatingPointError
        If every weight is zero, so no normalization exists.
    """
    lw = clean_log_weights(log_weights)
    total = logsumexp(lw)
    if not np.isfinite(total):
        raise FloatingPointError("all weights are zero (every log-weight is -inf or NaN)")
    return lw - total


def normalized_weights(log_weights: np.ndarray) -> np.ndarray:
    """Return the normalized weights ``exp(log_weights) / sum(exp(log_weights))``.

    Parameters
    ----------
    log_weights : array_like
        Unnormalized log-weights.

    Returns
    -------
    numpy.ndarray
        Non-negative weights summing to one.
    """
    w = np.exp(normalize_log_weights(log_weights))
    return w / w.sum()


def ess_from_log_weights(log_weights: np.ndarray) -> float:
    """Effective sample size ``(sum w)^2 / sum w^2`` computed in log space.

    Parameters
    ----------
    log_weights : array_like
        Unnormalized log-weights.

    Returns
    -------
    float
        A value in ``[1, N]``; ``0.0`` when every weight is zero.
    """
    lw = clean_log_weights(log_weights)
    total = logsumexp(lw)
    if not np.isfinite(total):
        return 0.0
    return float(np.exp(2.0 * total - logsumexp(2.0 * lw)))


def ess(weights: np.ndarray) -> float:
    """Effective sample size of (not necessarily normalized) non-negative weights.

    Parameters
    ----------
    weights : array_like
        Non-negative weights.

    Returns
    -------
    float
        ``(sum w)^2 / sum w^2``, or ``0.0`` if all weights are zero.
    """
    w = np.asarray(weights, dtype=np.float64)
    s2 = np.sum(w * w)
    if s2 == 0.0:
        return 0.0
    return float(np.sum(w) ** 2 / s2)


def log_z_relative_variance(log_weights: np.ndarray) -> float:
    """Delta-method variance of ``log(mean(w))`` from i.i.d. importance weights.

    For independent weights ``w_j`` (as in AIS, which never resamples),
    ``Var[log mean(w)] ≈ Var[w] / (N E[w]^2)``, estimated by ``1/ESS - 1/N``.

    Parameters
    ----------
    log_weights : array_like
        Unnormalized final log-weights of one run.

    Returns
    -------
    float
        The estimated variance (``inf`` when all weights vanish).
    """
    lw = clean_log_weights(log_weights)
    e = ess_from_log_weights(lw)
    if e == 0.0:
        return float("inf")
    return max(1.0 / e - 1.0 / lw.size, 0.0)
