"""Combining per-chain evidence estimates into one ``log Z`` with a Monte Carlo error.

Each chain ``c`` gives an (unbiased for ``Z``) estimate ``Ẑ_c`` and a within-chain
delta-method variance ``v_c ≈ Var[log Ẑ_c]`` computed from its own weights. Chains are
independent and equally sized, so the combined estimate averages the ``Ẑ_c`` (not their
logs) and stays unbiased for ``Z``:

``log Ẑ = logsumexp(log Ẑ_c) − log C``.

Two standard errors of ``log Ẑ`` are available:

* *within*: ``sqrt(Σ_c p_c² v_c)`` with ``p_c = Ẑ_c / Σ Ẑ``, from the weights only;
* *between* (``C ≥ 2``): ``sd(Ẑ_c) / (√C · mean(Ẑ_c))``, the delta method on the spread
  of the chains.

The reported MCSE is the larger of the two, so that neither a lucky agreement of few
chains nor over-confident weights alone can make the error bar small.
"""

from __future__ import annotations

import numpy as np

from .weights import logsumexp

__all__ = ["combine_chain_estimates"]


def combine_chain_estimates(
    log_z: np.ndarray, within_variance: np.ndarray | None = None
) -> tuple[float, float, dict]:
    """Combine per-chain ``log Ẑ_c`` into ``(log Ẑ, mcse, details)``.

    Parameters
    ----------
    log_z : array_like, shape (C,)
        Per-chain log evidence estimates.
    within_variance : array_like, shape (C,), optional
        Per-chain within-chain variances of ``log Ẑ_c``; NaN entries are ignored.

    Returns
    -------
    value : float
        ``log`` of the mean of the chains' ``Ẑ``.
    mcse : float
        The larger of the within and between standard errors (see the module
        docstring); NaN if neither is available.
    details : dict
        ``{"mcse_within": ..., "mcse_between": ..., "n_chains": C}``.
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

    mcse_within = np.nan
    if within_variance is not None:
        v = np.asarray(within_variance, dtype=np.float64).ravel()
        if v.shape != lz.shape:
            raise ValueError("within_variance must have one entry per chain")
        ok = np.isfinite(v)
        if ok.any():
            mcse_within = float(np.sqrt(np.sum(p[ok] ** 2 * v[ok])))
    mcse_between = np.nan
    if c >= 2:
        rel = np.exp(lz - lz.max())  # Ẑ_c up to a common factor
        mcse_between = float(np.std(rel, ddof=1) / (np.sqrt(c) * np.mean(rel)))
    candidates = [m for m in (mcse_within, mcse_between) if np.isfinite(m)]
    mcse = float(max(candidates)) if candidates else float("nan")
    return value, mcse, {"mcse_within": mcse_within, "mcse_between": mcse_between, "n_chains": c}
