"""Resampling schemes, ``(rng, weights, n) -> indices``, and the policy of when to resample.

All schemes take normalized, non-negative weights and return ``n`` ancestor indices whose
expected offspring counts are ``n * weights`` (unbiased). Vectorized with
``searchsorted``; no Python loop over particles. :class:`ResamplingPolicy` says when the
annealing loop resamples (never = AIS, always, or when the ESS falls below a fraction of
``N``) and with which scheme.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = [
    "RESAMPLERS",
    "RESAMPLE_POLICIES",
    "ResamplingPolicy",
    "get_resampler",
    "multinomial",
    "residual",
    "stratified",
    "systematic",
]


def _check(weights: np.ndarray, n: int) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or w.size == 0:
        raise ValueError("weights must be a non-empty 1-D array")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if np.any(~np.isfinite(w)) or np.any(w < 0):
        raise ValueError("weights must be finite and non-negative")
    s = w.sum()
    if s <= 0:
        raise ValueError("weights sum to zero: nothing to resample from")
    return w / s


def _inverse_cdf(weights: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    cdf = np.cumsum(weights)
    cdf[-1] = 1.0  # guard against round-off leaving cdf[-1] < max(uniforms)
    idx = np.searchsorted(cdf, uniforms, side="right")
    return np.minimum(idx, weights.size - 1)


def multinomial(rng: np.random.Generator, weights: np.ndarray, n: int) -> np.ndarray:
    """Multinomial resampling: ``n`` i.i.d. draws from the categorical distribution."""
    w = _check(weights, n)
    return _inverse_cdf(w, np.sort(rng.random(n)))


def stratified(rng: np.random.Generator, weights: np.ndarray, n: int) -> np.ndarray:
    """Stratified resampling: one uniform in each stratum ``[k/n, (k+1)/n)``."""
    w = _check(weights, n)
    return _inverse_cdf(w, (np.arange(n) + rng.random(n)) / n)


def systematic(rng: np.random.Generator, weights: np.ndarray, n: int) -> np.ndarray:
    """Systematic resampling: a single uniform shifted across the ``n`` strata."""
    w = _check(weights, n)
    return _inverse_cdf(w, (np.arange(n) + rng.random()) / n)


def residual(rng: np.random.Generator, weights: np.ndarray, n: int) -> np.ndarray:
    """Residual resampling: ``floor(n w)`` copies, the remainder drawn multinomially."""
    w = _check(weights, n)
    counts = np.floor(n * w).astype(np.int64)
    idx = np.repeat(np.arange(w.size), counts)
    n_rest = n - counts.sum()
    if n_rest > 0:
        rest = n * w - counts
        rest_idx = _inverse_cdf(rest / rest.sum(), np.sort(rng.random(n_rest)))
        idx = np.concatenate([idx, rest_idx])
    return idx


RESAMPLERS: dict[str, Callable[[np.random.Generator, np.ndarray, int], np.ndarray]] = {
    "systematic": systematic,
    "stratified": stratified,
    "multinomial": multinomial,
    "residual": residual,
}


def get_resampler(name: str):
    """Return the resampling function called ``name``.

    Parameters
    ----------
    name : str
        One of ``"systematic"``, ``"stratified"``, ``"multinomial"``, ``"residual"``.
    """
    try:
        return RESAMPLERS[name]
    except KeyError:
        raise ValueError(
            f"resampler={name!r} is unknown; choose one of {sorted(RESAMPLERS)}"
        ) from None


RESAMPLE_POLICIES = ("never", "always", "ess")


@dataclass(frozen=True)
class ResamplingPolicy:
    """When the annealing loop resamples, and how.

    Attributes
    ----------
    when : {"never", "always", "ess"}, default "never"
        ``"never"`` is AIS; ``"ess"`` resamples when the ESS falls below
        ``ess_threshold · N``.
    ess_threshold : float, default 0.5
        κ of the ``"ess"`` policy, in ``(0, 1]``.
    scheme : str, default "systematic"
        A key of :data:`RESAMPLERS`.
    """

    when: str = "never"
    ess_threshold: float = 0.5
    scheme: str = "systematic"

    def __post_init__(self):
        if self.when not in RESAMPLE_POLICIES:
            raise ValueError(f"resample={self.when!r} is unknown; choose one of {RESAMPLE_POLICIES}")
        if not 0.0 < self.ess_threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {self.ess_threshold}")

    def check_scheme(self) -> None:
        """Raise for an unknown ``scheme``."""
        get_resampler(self.scheme)

    def wants(self, ess: float, n: int) -> bool:
        """Whether to resample a population of ``n`` whose ESS is ``ess``."""
        return self.when == "always" or (self.when == "ess" and ess < self.ess_threshold * n)

    def indices(self, rng: np.random.Generator, weights: np.ndarray, n: int) -> np.ndarray:
        """``n`` ancestor indices for normalized ``weights`` by the policy's scheme."""
        return get_resampler(self.scheme)(rng, weights, n)
