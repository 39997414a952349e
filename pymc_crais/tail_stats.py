"""Statistics of importance weights that the diagnostics and the error bars share: Pareto k̂
(the fit of ``arviz_stats``, in NumPy) of one chain's weights, of all chains' pooled, or
from a recorded tail; the heavy-tail factor on the within-chain variance; the chains'
agreement test."""

from __future__ import annotations

import numpy as np

from .core.tails import pareto_tail_size
from .core.weights import logsumexp

__all__ = [
    "KHAT_THRESHOLD",
    "chain_agreement",
    "heavy_tail_factor",
    "pareto_khat",
    "pareto_khat_from_tail",
    "pooled_pareto_khat",
]

KHAT_THRESHOLD = 0.7
"""Above this Pareto k̂ the weights' variance is effectively infinite at this N (PSIS)."""


def _gpd_shape(exceedances: np.ndarray) -> float:
    """Shape ``k`` of a generalized Pareto fit to ``exceedances`` (ascending, ≥ 0).

    The empirical-Bayes estimate of Zhang & Stephens (2009) with the weak prior of
    Vehtari et al. (PSIS, 2024) on ``k`` (a normal centred at 0.5 worth 10 observations), the
    fit ``arviz_stats`` uses (``tests/test_tail_stats.py`` checks the two agree). Written out
    here because importing ``arviz_stats`` (and ``arviz_base`` with it) cost about 2 s of a
    default ``sample_smc`` call (``docs/benchmarks.md``, "Where the time goes"). NaN when the
    first quartile is not above the minimum (not a Pareto tail), ``inf`` when the fit fails.
    """
    x = exceedances
    n = x.size
    m = 30 + int(n**0.5)  # grid points of the profile over b = -k / σ
    q1 = x[int(n / 4 + 0.5) - 1]
    if q1 <= x[0]:
        return float("nan")
    b = 1.0 - np.sqrt(m / (np.arange(1, m + 1, dtype=np.float64) - 0.5))
    b /= 3.0 * q1
    b += 1.0 / x[-1]
    k = np.mean(np.log1p(-b[:, None] * x), axis=1)
    profile = n * (np.log(-b / k) - k - 1.0)
    w = np.exp(profile - logsumexp(profile))
    keep = w >= 10 * np.finfo(float).eps
    w, b = w[keep], b[keep]
    w /= w.sum()
    k_hat = np.mean(np.log1p(-np.sum(b * w) * x))
    k_hat = (n * k_hat + 10 * 0.5) / (n + 10)
    return float("inf") if np.isnan(k_hat) else float(k_hat)


def pareto_khat(log_weights) -> float:
    """Pareto k̂ of importance weights given by their logs (right tail, ``r_eff = 1``, as
    ``arviz_stats``' ``pareto_khat``). NaN when fewer than 25 weights are positive or the
    tail is flat.

    The weights are exponentiated relative to their maximum; the ``M`` largest
    (:func:`~pymc_crais.core.tails.pareto_tail_size`) minus the ``(M + 1)``-th largest are
    fitted by :func:`_gpd_shape`.
    """
    lw = np.asarray(log_weights, dtype=np.float64).ravel()
    lw = lw[np.isfinite(lw)]
    if lw.size < 25:
        return float("nan")
    w = np.sort(np.exp(lw - lw.max()))
    m = pareto_tail_size(w.size)
    tail = w[w.size - m :]
    if abs(tail[-1] - tail[0]) < np.finfo(float).tiny:  # equal weights: no tail to fit
        return float("nan")
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return _gpd_shape(tail - w[w.size - m - 1])


def pooled_pareto_khat(log_weights, log_z) -> float:
    """k̂ of the final weights of all chains together, each chain's weights scaled to sum
    to its ``Ẑ_c``: the weights of the combined estimate ``mean_c Ẑ_c`` (for AIS exactly
    the pooled importance weights). Four chains of 1000 weights give a far steadier k̂
    than each chain alone (one d = 5 regression run: 0.73, 0.58, 0.62, 0.53 per chain,
    0.56 pooled).
    """
    lw = np.asarray(log_weights, dtype=np.float64)
    lz = np.asarray(log_z, dtype=np.float64).ravel()
    if lw.ndim != 2 or lw.shape[0] != lz.size:
        return float("nan")
    parts = []
    for row, z in zip(lw, lz, strict=True):
        total = logsumexp(np.where(np.isfinite(row), row, -np.inf))
        if np.isfinite(total) and np.isfinite(z):
            parts.append(row - total + z)
    return pareto_khat(np.concatenate(parts)) if parts else float("nan")


def pareto_khat_from_tail(tail, n: int) -> float:
    """k̂ of ``n`` log-weights of which ``tail`` holds the ``M + 1`` largest, ascending
    (:func:`pymc_crais.core.tails.log_weight_tail`).

    The fit uses only the ``M`` largest weights above the ``(M + 1)``-th, so padding the
    tail with copies of its smallest value gives exactly the k̂ of the full array.
    """
    tail = np.asarray(tail, dtype=np.float64).ravel()
    finite = tail[np.isfinite(tail)]
    if finite.size < tail.size:  # fewer positive weights than the tail: they are all here
        return pareto_khat(finite)
    if tail.size < pareto_tail_size(n) + 1:
        return float("nan")
    pad = np.full(max(int(n) - tail.size, 0), tail[0])
    return pareto_khat(np.concatenate([pad, tail]))


def heavy_tail_factor(khat) -> np.ndarray:
    """Factor on the within-chain *variance* of ``log Ẑ`` for weights with Pareto k̂.

    The sample variance of heavy-tailed weights is small more often than not: it only
    grows when one of the rare large weights is drawn. ``benchmarks/heavy_tail.py``
    simulates importance weights of two families (generalized Pareto and log-normal, the
    two shapes of the tail that k̂ sees) at N = 250 to 4000 and finds, for each bin of the
    *estimated* k̂, the factor ``f`` on the variance that makes ``±2·sqrt(f·v)`` cover the
    true ``log Z`` 95 % of the time in the worse of the two families: 1.1 for
    ``k̂ ≤ 0.1``, 1.3 at 0.1–0.2, 1.5 at 0.2–0.3, 2.4 at 0.3–0.4, 3.4 at 0.4–0.5, 4.6 and
    4.3 at 0.5–0.7 (docs/reliability.md; with the fit, 93.5–97.3 % coverage in every
    bin). The fit is
    ``f = 1 + 6·(k̂ − 0.1)`` between 0.1 and 0.7 (4.6 at 0.7), 1 below; above 0.7 no
    factor can help (the variance is infinite) and the run is flagged instead, the factor
    staying at its value at 0.7.
    """
    k = np.asarray(khat, dtype=np.float64)
    k = np.where(np.isfinite(k), k, 0.0)
    return 1.0 + 6.0 * np.clip(k - 0.1, 0.0, KHAT_THRESHOLD - 0.1)


# ----------------------------------------------------------------------------- agreement
def chain_agreement(log_z, within_variance) -> tuple[float, float]:
    """Do independent chains agree within their errors? ``(statistic, p_value)``.

    ``Q = Σ_c (log Ẑ_c − m)² / v_c`` with ``m`` the precision-weighted mean and ``v_c``
    each chain's within-chain variance of ``log Ẑ_c``; under agreement ``Q ~ χ²_{C−1}``.
    NaN with fewer than two chains with a positive finite variance.
    """
    lz = np.asarray(log_z, dtype=np.float64).ravel()
    v = np.asarray(within_variance, dtype=np.float64).ravel()
    ok = np.isfinite(lz) & np.isfinite(v) & (v > 0)
    if ok.sum() < 2:
        return float("nan"), float("nan")
    lz, v = lz[ok], v[ok]
    m = np.sum(lz / v) / np.sum(1.0 / v)
    q = float(np.sum((lz - m) ** 2 / v))
    from scipy.special import chdtrc  # chi2.sf, without importing scipy.stats (≈ 1 s)

    return q, float(chdtrc(lz.size - 1, q))


# ----------------------------------------------------------------------------- report
