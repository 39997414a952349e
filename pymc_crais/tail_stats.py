"""Statistics of importance weights that the diagnostics and the error bars share: Pareto k̂
(``arviz_stats``) of one chain's weights, of all chains' pooled, or from a recorded tail; the
heavy-tail factor on the within-chain variance; the chains' agreement test."""

from __future__ import annotations

import warnings

import numpy as np

from .core.tails import pareto_tail_size

__all__ = [
    "KHAT_INFINITE_MEAN",
    "KHAT_THRESHOLD",
    "arviz_array_stats",
    "chain_agreement",
    "heavy_tail_factor",
    "pareto_khat",
    "pareto_khat_from_tail",
    "pooled_pareto_khat",
]

KHAT_THRESHOLD = 0.7
"""Above this Pareto k̂ the weights' variance is effectively infinite at this N (PSIS)."""

KHAT_INFINITE_MEAN = 1.0
"""At or above this Pareto k̂ the weights' mean itself is infinite: an importance density
with such weights misses a region of the target's mass."""

MIN_WEIGHTS = 25
"""Fewest positive weights :func:`pareto_khat` fits a tail to."""


def _array_stats():
    """``arviz_stats.base.array_stats``; its first import draws from NumPy's global RNG
    (measured: the state changes), which the package never touches, so the state is put
    back."""
    state = np.random.get_state()
    from arviz_stats.base import array_stats

    if not _same_state(state, np.random.get_state()):
        np.random.set_state(state)
    return array_stats


def arviz_array_stats():
    """``arviz_stats.base.array_stats`` (ESS, R-hat, k̂ on arrays), imported without
    touching NumPy's global RNG (see :func:`_array_stats`); for the other layers."""
    return _array_stats()


def _same_state(a, b) -> bool:
    return a[0] == b[0] and np.array_equal(a[1], b[1]) and tuple(a[2:]) == tuple(b[2:])


def pareto_khat(log_weights) -> float:
    """Pareto k̂ of importance weights given by their logs (``arviz_stats``, right tail,
    ``r_eff = 1``). NaN when fewer than 25 weights are positive or the tail is flat (equal
    weights); ``inf`` when no more weights than the tail's ``M`` are within a factor
    ``exp(−745)`` of the largest (the others underflow to 0: a few weights carry
    everything, the most degenerate weights there are; the fit would fail, or fit the few
    above the zeros — a k̂ of 0.05 for a d = 61 regression's prior).

    The weights are exponentiated relative to their maximum (``arviz_stats``'
    ``log_weights=True`` option does not exponentiate before the fit in the installed
    version, so it is not used).
    """
    lw = np.asarray(log_weights, dtype=np.float64).ravel()
    lw = lw[np.isfinite(lw)]
    if lw.size < MIN_WEIGHTS:
        return float("nan")
    w = np.exp(lw - lw.max())
    if np.count_nonzero(w) <= pareto_tail_size(w.size):
        # finite log-weights more than 745 nats below the largest reach the tail: no fit
        # is meaningful there (arviz_stats fails, or fits the few above the zeros)
        return float("inf")
    array_stats = _array_stats()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            k = float(array_stats.pareto_khat(w, chain_axis=None, r_eff=1.0, tail="right"))
        except ValueError:  # "All tail values are the same": equal weights
            k = float("nan")
    return k


def pooled_pareto_khat(log_weights, log_z, copies=None) -> float:
    """k̂ of the final weights of all chains together, each chain's weights scaled to sum
    to its ``Ẑ_c``: the weights of the combined estimate ``mean_c Ẑ_c`` (for AIS exactly
    the pooled importance weights). Four chains of 1000 weights give a far steadier k̂
    than each chain alone (one d = 5 regression run: 0.73, 0.58, 0.62, 0.53 per chain,
    0.56 pooled).

    ``copies``: one per chain, the size of the families of consecutive rows that share a
    draw (``family_copies`` of a conditional-Laplace start; ``None`` or missing: none).
    Where every chain has the same size ``c > 1``, the k̂ is that of the family weights
    (the mean of each block of ``c``): copies of one exact conditional carry nearly equal
    weights, and ``c``-fold ties distort a tail fit (16 copies gave 0.94 and 1.84 on runs
    whose family k̂ was below 0.5).
    """
    lw = np.asarray(log_weights, dtype=np.float64)
    lz = np.asarray(log_z, dtype=np.float64).ravel()
    if lw.ndim != 2 or lw.shape[0] != lz.size:
        return float("nan")
    from .core.weights import logsumexp

    listed = [None] if copies is None or len(copies) != lw.shape[0] else copies
    sizes = {int(c) if c is not None and np.isfinite(c) else 1 for c in listed}
    if len(sizes) == 1 and (c := sizes.pop()) > 1 and lw.shape[1] % c == 0:
        blocks = np.where(np.isfinite(lw), lw, -np.inf).reshape(lw.shape[0], -1, c)
        lw = logsumexp(blocks, axis=2) - np.log(c)

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
    k = np.where(np.isnan(k), 0.0, k)  # inf (degenerate weights) takes the factor at 0.7
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
    from scipy import stats

    return q, float(stats.chi2.sf(q, lz.size - 1))


# ----------------------------------------------------------------------------- report
