"""Importance draws made in families: several draws of ``x`` share one draw of ``θ``.

A two-level proposal ``q(θ) q(x | θ)`` whose conditional costs far more to set up than to
draw from (:mod:`.conditional_laplace`: a Newton run per ``θ``) draws ``c`` copies of ``x``
for each ``θ``. The copies of a family are not independent, so the family is the unit of
the estimator's variance and of its Pareto k̂ (:func:`family_log_weights`).

How many copies? With weights normalized to mean 1, the mean weight of a family of ``c``
has relative variance ``B + W / c``, where ``B = Var_θ E[w | θ]`` is the part ``θ`` decides
and ``W = E_θ Var[w | θ]`` the part the copies average out (:func:`family_variances`
estimates both from a pilot drawn in families). A run of ``N`` draws has ``N / c`` families,
so the relative variance of its ``Ẑ`` is ``(B c + W) / N``: more copies save set-up work
(``N / c`` conditionals instead of ``N / 4``) and cost precision in proportion to ``B``.
Where ``x | θ`` is exactly Gaussian and its conditional exact, ``W = 0`` and the copies are
nearly free; where the ``θ`` proposal fits well, ``B`` is small. :func:`copies_for_mcse`
picks the most copies whose predicted error meets a target.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "copies_for_mcse",
    "family_log_weights",
    "family_size",
    "family_variances",
    "predicted_family_mcse",
]


def family_size(n: int, copies: int) -> int:
    """The copies per family when ``n`` draws are made in equal families of at most
    ``copies``: the largest divisor of ``n`` not above it."""
    return next(c for c in range(int(copies), 0, -1) if int(n) % c == 0)


def family_log_weights(log_weights: np.ndarray, family: np.ndarray) -> np.ndarray:
    """One log-weight per family, the log of the mean of its members' weights (families
    numbered ``0..M-1``, every one present): the independent units of a start drawn in
    families, whose Pareto k̂ is the meaningful one (copies of one exact conditional carry
    equal weights, and ties distort a tail fit)."""
    lw = np.asarray(log_weights, dtype=np.float64)
    fam = np.asarray(family)
    top = np.max(lw) if np.any(np.isfinite(lw)) else 0.0
    total = np.bincount(fam, weights=np.exp(lw - top))
    count = np.bincount(fam)
    with np.errstate(divide="ignore"):
        return np.log(total / count) + top


def family_variances(log_weights: np.ndarray, family: np.ndarray) -> tuple[float, float]:
    """``(B, W)`` from a sample drawn in equal families of ``c ≥ 2`` (module docstring), for
    weights normalized to mean 1: ``W`` the mean within-family sample variance, ``B`` the
    sample variance of the family means less ``W / c`` (floored at 0; both unbiased before
    the floor). NaN and ``-inf`` log-weights are weights of 0; ``(inf, inf)`` when no weight is
    positive, one is infinite, or fewer than two families were drawn.

    Like any sample variance of weights, trust it only where their right tail is light
    (family-level Pareto k̂ below about 1/2).
    """
    lw = np.asarray(log_weights, dtype=np.float64).ravel()
    fam = np.unique(np.asarray(family).ravel(), return_inverse=True)[1]
    counts = np.bincount(fam)
    m = counts.size
    if not np.all(counts == counts[0]):
        raise ValueError("family_variances needs families of equal size")
    if m < 2 or counts[0] < 2:
        return float("inf"), float("inf")
    c = int(counts[0])
    finite = np.isfinite(lw)
    if not finite.any() or np.any(lw == np.inf):  # no weight, or an infinite one
        return float("inf"), float("inf")
    w = np.where(finite, np.exp(np.where(finite, lw, 0.0) - np.max(lw[finite])), 0.0)
    w = w / np.mean(w)
    means = np.bincount(fam, weights=w) / c
    within = np.bincount(fam, weights=(w - means[fam]) ** 2) / (c - 1)
    w_part = float(np.mean(within))
    b_part = float(np.var(means, ddof=1)) - w_part / c
    return max(b_part, 0.0), w_part


def predicted_family_mcse(between: float, within: float, copies: int, n_draws: int) -> float:
    """The standard error of ``log Ẑ`` predicted for ``n_draws`` draws (all chains together)
    in families of ``copies``: ``√((B c + W) / n_draws)``."""
    return float(np.sqrt((between * copies + within) / n_draws))


def copies_for_mcse(
    between: float,
    within: float,
    n: int,
    chains: int,
    target_mcse: float,
    *,
    low: int,
    high: int,
) -> int:
    """The most copies per family, from ``low`` to ``high`` (each a divisor of the ``n``
    draws of a chain, :func:`family_size`), whose :func:`predicted_family_mcse` over
    ``chains`` chains is at most ``target_mcse``; ``family_size(n, low)`` where none is.
    """
    best = family_size(n, low)
    for c in range(best + 1, int(high) + 1):
        if n % c == 0 and predicted_family_mcse(between, within, c, n * chains) <= target_mcse:
            best = c
    return best
