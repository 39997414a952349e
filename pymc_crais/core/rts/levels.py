"""The temperature half of tempered sampling: ``q(k | θ)``, level draws, and one Gibbs sweep.

A sweep is ``θ | k`` (the kernel moves every particle at its own level's ``γ_{τ_k}`` in one
batched call, through :class:`~pymc_crais.core.paths.ArrayTauPath` and the kernel's
per-level parameters) followed by an exact draw of ``k | θ`` from
``q(k | θ) ∝ r_k γ_k(θ) / Ẑ_k`` over all ``K`` levels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels import LevelParams, MutationKernel
from ..kernels.moves import Moves
from ..particles import ParticleState
from ..paths import AnnealingPath, ArrayTauPath

__all__ = [
    "Sweep",
    "TemperingSweep",
    "exp_flush",
    "ladder_log_ratio",
    "sample_levels",
    "tau_derivative",
    "temperature_log_conditional",
]


def exp_flush(log_p: np.ndarray) -> np.ndarray:
    """``exp`` with arguments below −340 flushed to exactly 0: subnormal floats (also from
    squaring or multiplying the results) make the later sums and matrix products many times
    slower, and such terms are below 1e-147 relative to the largest one (which is 1 where
    this is used)."""
    return np.exp(np.where(log_p < -340.0, -np.inf, log_p))


def ladder_log_ratio(path: AnnealingPath, taus, delta) -> np.ndarray:
    """``h(τ_k, Δ_j)`` for every level and particle, ``(K, N)``
    (:meth:`AnnealingPath.ladder_log_ratio`)."""
    return path.ladder_log_ratio(taus, delta)


def tau_derivative(path: AnnealingPath, tau, delta) -> np.ndarray:
    """``∂_τ log γ_τ(θ)``, the integrand of thermodynamic integration
    (:meth:`AnnealingPath.tau_derivative`)."""
    return path.tau_derivative(tau, delta)


def temperature_log_conditional(
    log_ratio_kn: np.ndarray, log_prior: np.ndarray, log_z: np.ndarray
) -> np.ndarray:
    """``log q(k | θ_j)`` for every level and particle, normalized over ``k``.

    ``q(k | θ) ∝ r_k γ_k(θ) / Ẑ_k``; ``log q0(θ)`` is common to all levels and cancels, so
    only ``h(τ_k, Δ) = log γ_k − log q0`` enters.

    Parameters
    ----------
    log_ratio_kn : numpy.ndarray, shape (K, N)
        :meth:`AnnealingPath.ladder_log_ratio`.
    log_prior : numpy.ndarray, shape (K,)
        ``log r_k``.
    log_z : numpy.ndarray, shape (K,)
        Current ``log Ẑ_k``.
    """
    a = log_ratio_kn + (np.asarray(log_prior) - np.asarray(log_z))[:, None]
    a = np.where(np.isnan(a), -np.inf, a)
    m = np.max(a, axis=0, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        norm = np.log(np.sum(exp_flush(a - m), axis=0, keepdims=True)) + m
    out = a - norm
    # A particle with zero density at every level (never produced by a valid chain) stays at
    # the first level rather than spreading NaN.
    bad = ~np.isfinite(norm[0])
    if bad.any():
        out[:, bad] = -np.inf
        out[0, bad] = 0.0
    return out


def sample_levels(rng: np.random.Generator, log_q: np.ndarray) -> np.ndarray:
    """Draw one level per particle from ``exp(log_q)`` (columns normalized), by inverse CDF."""
    q = exp_flush(log_q)
    cum = np.cumsum(q, axis=0)
    u = rng.random(q.shape[1]) * cum[-1]
    k = np.sum(cum < u[None, :], axis=0)
    return np.minimum(k, q.shape[0] - 1).astype(np.int64)


@dataclass
class Sweep:
    """One Gibbs sweep's outcome.

    Attributes
    ----------
    state : ParticleState
        The particles after the ``θ | k`` moves.
    used : numpy.ndarray of int
        The levels the moves were made at.
    levels : numpy.ndarray of int
        The new levels drawn from ``q(k | θ)``.
    moved : numpy.ndarray of bool
        Whether each particle's position changed.
    log_q : numpy.ndarray, shape (K, N)
        ``log q(k | θ)`` of the new positions.
    """

    state: ParticleState
    used: np.ndarray
    levels: np.ndarray
    moved: np.ndarray
    log_q: np.ndarray


class TemperingSweep:
    """The Gibbs sweep of one tempered-sampling run (ladder, level prior, kernel, moves)."""

    def __init__(
        self,
        density,
        path: AnnealingPath,
        ladder: np.ndarray,
        log_prior: np.ndarray,
        kernel: MutationKernel,
        moves: Moves,
    ):
        self.density = density
        self.path = path
        self.array_path = ArrayTauPath(path)
        self.ladder = ladder
        self.log_prior = log_prior
        self.kernel = kernel
        self.moves = moves

    def log_conditional(self, state: ParticleState, log_z: np.ndarray) -> np.ndarray:
        """``log q(k | θ)`` of the particles, ``(K, N)``."""
        return temperature_log_conditional(
            self.path.ladder_log_ratio(self.ladder, state.delta), self.log_prior, log_z
        )

    def __call__(
        self, rng, state: ParticleState, levels: np.ndarray, log_z: np.ndarray, params: LevelParams
    ) -> Sweep:
        """``θ | k`` moves at each particle's level, then a ``k | θ`` draw."""
        moves = self.moves.run(
            rng,
            self.kernel,
            state,
            self.density,
            self.array_path,
            self.ladder[levels],
            self.kernel.select_level_params(params, levels),
        )
        log_q = self.log_conditional(moves.state, log_z)
        return Sweep(moves.state, levels, sample_levels(rng, log_q), moves.moved, log_q)
