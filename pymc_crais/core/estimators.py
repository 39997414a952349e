"""Combining per-chain evidence estimates into one ``log Z`` with a Monte Carlo error.

Each chain ``c`` gives an (unbiased for ``Z``) estimate ``Ẑ_c`` and a within-chain
delta-method variance ``v_c ≈ Var[log Ẑ_c]`` computed from its own weights. Chains are
independent and equally sized, so the combined estimate averages the ``Ẑ_c`` (not their
logs) and stays unbiased for ``Z``:

``log Ẑ = logsumexp(log Ẑ_c) − log C``.

The reported error is the pooled within-chain one,
``sqrt(Σ_c p_c² f_c v_c)`` with ``p_c = Ẑ_c / Σ Ẑ``: ``Var[mean Ẑ_c] = Σ_c Var[Ẑ_c]/C²``
for independent chains, each ``Var[Ẑ_c]`` estimated by ``v_c Ẑ_c²`` and divided by the
squared mean. ``f_c ≥ 1`` corrects ``v_c`` for heavy-tailed weights (the sample variance of
such weights is too small more often than not); it is a function of the chain's Pareto k̂
calibrated by simulation (:func:`pymc_crais.diagnostics.heavy_tail_factor`). The spread of
the chains is not multiplied into the error: it is a *check* (a chi-square test of the
``log Ẑ_c`` against their ``v_c``, :func:`pymc_crais.diagnostics.chain_agreement`) that
warns when the chains disagree. ``details["mcse_between"]`` (the delta method on the
chains' spread) is kept for reference. Derivation and coverage: docs/reliability.md.

Tempered sampling's estimators live here too: the RTS update of the level guesses
(:func:`rts_update`), its final estimate with a group variance (:func:`rts_estimate`), and
thermodynamic integration by the trapezoid rule from plain or Rao-Blackwellized level means
(:func:`thermodynamic_integration`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .weights import clean_log_weights, logsumexp

__all__ = [
    "RTSEstimate",
    "ancestry_variance",
    "combine_chain_estimates",
    "rts_estimate",
    "rts_update",
    "thermodynamic_integration",
    "trapezoid",
]


def ancestry_variance(
    log_weights: np.ndarray,
    eve: np.ndarray,
    n_resamplings: int,
    *,
    multinomial: bool = False,
    n_families: int | None = None,
) -> float:
    """Within-run variance of ``log Ẑ`` for a particle system with resampling.

    Every particle carries the index of its *Eve*, the initial particle it descends from
    through all the resamplings. Particles of one family share their history, so their
    errors are not independent; the estimate works with the families' total weights
    ``m_e = Σ_{i: E_i = e} W_i`` (``W`` the final normalized weights, ``S = Σ_e m_e²``):

    * low-variance resampling (systematic, stratified, residual; ``multinomial=False``):
      ``V = S − 1/N``, the importance-sampling formula ``1/ESS − 1/N`` applied to the
      families (the form of Chan & Lai's estimator). Without resampling every particle is
      its own family and this is exactly the AIS estimate.
    * multinomial resampling: Lee & Whiteley's unbiased estimator
      ``V = 1 − (N/(N−1))^{R+1} (1 − S)`` (``R`` resamplings), which removes the family
      fluctuations that multinomial resampling itself creates. With systematic resampling
      those fluctuations are far smaller and the correction overshoots (negative estimates),
      hence the first form there.

    ``V`` estimates the relative variance ``Var[Ẑ]/Z²`` and, by the delta method,
    ``Var[log Ẑ]``. Calibration against exact evidences: docs/reliability.md.

    Parameters
    ----------
    log_weights : array_like, shape (N,)
        Final unnormalized log-weights (``-inf`` allowed).
    eve : array_like of int, shape (N,)
        Index in ``0..N-1`` of each particle's Eve.
    n_resamplings : int
        Number of resampling steps the run made.
    multinomial : bool, default False
        Whether the resampling was multinomial.
    n_families : int, optional
        The number ``M`` of Eves the run started with, when its initial particles came in
        families of equal size drawn together (``M < N``: several draws sharing one
        hyperparameter draw, :mod:`pymc_crais.core.conditional_laplace`). The families are
        then the independent units and, for a run that did not resample, ``V = S − 1/M``
        (with either scheme); ``None``: every particle its own Eve.

    Returns
    -------
    float
        ``max(V, 0)``; ``inf`` when every weight vanished. When the genealogy collapsed to a
        single Eve, ``V ≈ 1`` only says that one run cannot measure its own error:
        compare chains.
    """
    lw = clean_log_weights(log_weights)
    eve = np.asarray(eve)
    n = lw.size
    if eve.shape != lw.shape:
        raise ValueError(f"eve must have one entry per particle ({n}), got shape {eve.shape}")
    if n < 2:
        raise ValueError("the ancestry variance needs at least 2 particles")
    if int(n_resamplings) != n_resamplings or n_resamplings < 0:
        raise ValueError(f"n_resamplings must be a non-negative integer, got {n_resamplings}")
    total = logsumexp(lw)
    if not np.isfinite(total):
        return float("inf")
    w = np.exp(lw - total)
    family = np.bincount(eve, weights=w, minlength=n)
    same = float(np.sum(family * family))  # Σ over pairs (i, j) with a common Eve of W_i W_j
    if n_families is not None and n_families < n:
        if n_resamplings:
            raise ValueError("n_families (grouped initial draws) needs a run without resampling")
        return float(max(same - 1.0 / int(n_families), 0.0))
    if multinomial:
        v = 1.0 - np.exp((int(n_resamplings) + 1) * np.log(n / (n - 1.0))) * (1.0 - same)
    else:
        v = same - 1.0 / n
    return float(max(v, 0.0))


def combine_chain_estimates(
    log_z: np.ndarray,
    within_variance: np.ndarray | None = None,
    tail_factor: np.ndarray | None = None,
) -> tuple[float, float, dict]:
    """Combine per-chain ``log Ẑ_c`` into ``(log Ẑ, mcse, details)``.

    Parameters
    ----------
    log_z : array_like, shape (C,)
        Per-chain log evidence estimates.
    within_variance : array_like, shape (C,), optional
        Per-chain within-chain variances of ``log Ẑ_c``; NaN entries are ignored.
    tail_factor : array_like, shape (C,), optional
        Per-chain factors ``f_c ≥ 1`` on ``within_variance`` for heavy-tailed weights
        (:func:`pymc_crais.diagnostics.heavy_tail_factor` of the chain's Pareto k̂).

    Returns
    -------
    value : float
        ``log`` of the mean of the chains' ``Ẑ``.
    mcse : float
        ``sqrt(Σ_c p_c² f_c v_c)`` (see the module docstring); the between-chain error
        when no chain has a within-chain variance; NaN if neither is available.
    details : dict
        ``mcse_within`` (uncorrected), ``mcse_between`` (delta method on the chains'
        spread, no t factor), ``tail_factor`` (the variance-weighted mean ``f``),
        ``n_chains``.
    """
    lz = np.asarray(log_z, dtype=np.float64).ravel()
    if lz.size == 0:
        raise ValueError("log_z is empty: there is no chain to combine")
    if not np.all(np.isfinite(lz)):
        raise ValueError(f"every chain's log Z must be finite, got {lz}")
    c = lz.size
    total = logsumexp(lz)
    value = float(total - np.log(c))
    p = np.exp(lz - total)  # each chain's share of the summed evidence

    mcse_within = mcse_corrected = np.nan
    factor = 1.0
    if within_variance is not None:
        v = np.asarray(within_variance, dtype=np.float64).ravel()
        if v.shape != lz.shape:
            raise ValueError("within_variance must have one entry per chain")
        f = np.ones(c) if tail_factor is None else np.asarray(tail_factor, dtype=np.float64)
        if f.shape != lz.shape:
            raise ValueError("tail_factor must have one entry per chain")
        f = np.where(np.isfinite(f) & (f >= 1.0), f, 1.0)
        ok = np.isfinite(v)
        if ok.any():
            raw = float(np.sum(p[ok] ** 2 * v[ok]))
            corrected = float(np.sum(p[ok] ** 2 * f[ok] * v[ok]))
            mcse_within, mcse_corrected = np.sqrt(raw), np.sqrt(corrected)
            factor = corrected / raw if raw > 0 else 1.0
    mcse_between = np.nan
    if c >= 2:
        rel = np.exp(lz - lz.max())  # Ẑ_c up to a common factor
        mcse_between = float(np.std(rel, ddof=1) / (np.sqrt(c) * np.mean(rel)))
    mcse = mcse_corrected if np.isfinite(mcse_corrected) else mcse_between
    return (
        value,
        float(mcse),
        {
            "mcse_within": float(mcse_within),
            "mcse_between": mcse_between,
            "tail_factor": float(factor),
            "n_chains": c,
        },
    )


# ----------------------------------------------------------------------------- tempered sampling
def rts_update(log_z: np.ndarray, log_prior: np.ndarray, log_c: np.ndarray) -> np.ndarray:
    """The RTS estimate ``log Ẑ_k + log r_1 − log r_k + log ĉ_k − log ĉ_1`` (first entry 0).

    With ``ĉ_k`` estimating the level marginal ``q(k) ∝ r_k Z_k / Ẑ_k``, this estimates
    ``log Z_k − log Z_1``.

    Parameters
    ----------
    log_z : numpy.ndarray, shape (K,)
        The ``log Ẑ_k`` the draws were made with.
    log_prior : numpy.ndarray, shape (K,)
        ``log r_k``.
    log_c : numpy.ndarray, shape (K,)
        ``log ĉ_k`` (any common additive constant cancels).
    """
    out = log_z - log_z[0] + log_prior[0] - log_prior + log_c - log_c[0]
    out[0] = 0.0
    return out


def trapezoid(taus, values) -> float:
    """Trapezoid rule ``Σ_k (τ_{k+1} − τ_k)(g_k + g_{k+1}) / 2`` (NaN if any ``g_k`` is)."""
    taus = np.asarray(taus, dtype=np.float64)
    g = np.asarray(values, dtype=np.float64)
    return float(np.sum(np.diff(taus) * 0.5 * (g[1:] + g[:-1])))


@dataclass(frozen=True)
class RTSEstimate:
    """RTS estimates from the final run's ``Σ q(k | θ)`` per level and particle group.

    Attributes
    ----------
    log_z_levels : numpy.ndarray, shape (K,)
        :func:`rts_update` of the frozen guesses with the run's ``ĉ`` (first entry 0).
    variance : float
        Delta-method variance of ``log Ẑ_K − log Ẑ_1`` over the groups.
    c_hat, c_hat_mcse : numpy.ndarray, shape (K,)
        ``ĉ_k`` (summing to 1) and its standard errors from the groups.
    """

    log_z_levels: np.ndarray
    variance: float
    c_hat: np.ndarray
    c_hat_mcse: np.ndarray


def rts_estimate(log_z, log_prior, c_groups: np.ndarray, group_sizes: np.ndarray) -> RTSEstimate:
    """RTS ``log Z_k`` from ``c_groups[k, g] = Σ q(k | θ)`` over group ``g``'s draws.

    The particles of the final run are independent chains given the frozen guesses; the
    variance is ``Var_g[ĉ_K^g/ĉ_K − ĉ_1^g/ĉ_1] / G`` (``inf`` if a group has no weight at
    either end).

    Parameters
    ----------
    log_z, log_prior : numpy.ndarray, shape (K,)
        The frozen guesses ``log Ẑ_k`` and ``log r_k``.
    c_groups : numpy.ndarray, shape (K, G)
    group_sizes : numpy.ndarray, shape (G,)
        Particles per group.
    """
    n_groups = c_groups.shape[1]
    c_tot = c_groups.sum(axis=1)
    c_hat = c_tot / c_tot.sum()
    with np.errstate(divide="ignore"):
        log_c = np.log(c_hat)
    log_z_rts = rts_update(log_z, log_prior, log_c)
    cg = c_groups / np.asarray(group_sizes, dtype=np.float64)[None, :]  # per-group means
    cm = c_tot / np.sum(group_sizes)
    with np.errstate(divide="ignore", invalid="ignore"):
        lin = cg[-1] / cm[-1] - cg[0] / cm[0]
    var = float(np.var(lin, ddof=1) / n_groups) if np.all(np.isfinite(lin)) else float("inf")
    mcse = np.std(c_groups / c_groups.sum(axis=0, keepdims=True), axis=1, ddof=1) / np.sqrt(n_groups)
    return RTSEstimate(log_z_rts, var, c_hat, mcse)


def thermodynamic_integration(ladder, sums: np.ndarray, weights: np.ndarray) -> tuple[float, float, np.ndarray]:
    """``∫ E_τ[∂_τ log γ_τ] dτ`` by the trapezoid rule over the ladder, with its group variance.

    The level means are ``Σ_g sums[k, g] / Σ_g weights[k, g]``: plain TI sums the
    derivatives of the draws at each level (weights: their numbers), RB-TI sums them
    weighted by ``q(k | θ)`` over all draws (weights: ``Σ q(k | θ)``). The variance is that
    of the per-group estimates over ``G`` (NaN if a group misses a level).

    Parameters
    ----------
    ladder : numpy.ndarray, shape (K,)
    sums, weights : numpy.ndarray, shape (K, G)

    Returns
    -------
    estimate : float
        Without the path's scale shift.
    variance : float
    level_means : numpy.ndarray, shape (K,)
    """
    n_groups = sums.shape[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        means = sums.sum(axis=1) / weights.sum(axis=1)
        per_group = np.array([trapezoid(ladder, sums[:, g] / weights[:, g]) for g in range(n_groups)])
    var = float(np.var(per_group, ddof=1) / n_groups) if np.all(np.isfinite(per_group)) else float("nan")
    return trapezoid(ladder, means), var, means
