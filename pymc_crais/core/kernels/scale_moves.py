"""Scale moves: Metropolis moves along a group orbit that rescales a block of coordinates
while it shifts the coordinate that sets their scale (a hierarchical model's neck).

In a centred hierarchical model ``β_j ~ N(μ, τ)`` the conditional spread of ``log τ``
given the ``β`` is about ``1/√(2J)`` of its marginal spread, and a gradient move that keeps
the ``β`` nearly fixed can move ``log τ`` only by that much: with ``J = 300`` coefficients a
population's ``log τ`` stays where it started for hundreds of HMC transitions (Neal's
funnel). Moving ``log τ`` by ``s`` *and* scaling the ``β`` around their centre by ``e^s``
follows the funnel instead of crossing it.

The move here learns such orbits from the population, with no knowledge of the model:

* for every coordinate ``i`` and every other coordinate ``j``, the (weighted) correlation
  between ``x_i`` and ``L_j = log |x_j − m_j|`` (``m`` the population mean) and the slope
  ``b_ij`` of the regression of ``L_j`` on ``x_i``; ``j`` is in ``i``'s block when
  ``|corr| ≥`` :data:`MIN_CORRELATION`;
* the coordinates with at least :data:`MIN_BLOCK` coordinates in their block, the
  :data:`MAX_MOVES` strongest (sum of squared correlations), each make one move per
  transition;
* the map ``T_s``: ``x_i ↦ x_i + s``, ``x_j ↦ m_j + (x_j − m_j) e^{b_ij s}`` for ``j`` in the
  block. ``T_s ∘ T_t = T_{s+t}`` and ``T_{−s} = T_s^{-1}`` (a one-parameter group), its
  Jacobian is ``exp(s Σ_j b_ij)``, so with ``s ~ N(0, σ²)`` the Metropolis ratio
  ``γ(T_s x) e^{s Σ_j b_ij} / γ(x)`` leaves ``γ`` invariant (Liu & Sabatti 2000, generalized
  Gibbs with a group move), whatever ``m`` and ``b``;
* ``m``, ``b``, the blocks and ``σ = c · sd(x_i)`` are fitted to one half of the population
  and move the other half (:func:`~pymc_crais.core.kernels.moments.split_halves`), so no
  particle's move depends on its own position; ``c`` is adapted between transitions towards
  an acceptance of :data:`TARGET_ACCEPT`, as the step sizes are.

A wrong block or slope costs only rejected moves (one model evaluation per move and
particle), never the invariance of ``γ``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..particles import ParticleState
from .kernel_base import metropolis_accept
from .moments import split_halves

__all__ = [
    "MAX_MOVES",
    "MIN_BLOCK",
    "MIN_CORRELATION",
    "TARGET_ACCEPT",
    "ScaleMoves",
    "fit_scale_moves",
    "scale_move_step",
]

MIN_CORRELATION = 0.3
"""``|corr(x_i, log |x_j − m_j|)|`` from which ``j`` joins ``i``'s block. The correlation's
sampling noise with 1,000 particles is about 0.03; in a funnel ``β_j = τ z_j`` it is
``sd(log τ) / √(var(log τ) + π²/8)``: 0.7 under a HalfNormal(1) prior on ``τ``."""
MIN_BLOCK = 2
"""Fewest coordinates in a block for ``i`` to make a scale move."""
MAX_MOVES = 2
"""Most scale moves per transition (each costs one model evaluation per particle)."""
TARGET_ACCEPT = 0.44
"""Acceptance the proposal scale ``c`` is adapted towards (a one-dimensional random walk's)."""
LOG_C_RANGE = (np.log(1e-3), np.log(10.0))


@dataclass(frozen=True)
class ScaleMoves:
    """Fitted scale moves, per half of the population.

    ``coords[h]`` (shape ``(K_h,)``), ``slopes[h]`` (``(K_h, d)``, zero outside the block)
    and ``sigma[h]`` (``(K_h,)``) are fitted to half ``h`` and move the particles of half
    ``1 − h``; ``center[h]`` (``(d,)``) is ``m``. ``log_c`` is the adapted proposal scale
    relative to ``sd(x_i)``; ``groups`` as :func:`~pymc_crais.core.kernels.moments.split_halves`.
    """

    coords: tuple
    slopes: tuple
    center: tuple
    sigma: tuple
    log_c: float
    groups: np.ndarray | None = None

    @property
    def n_moves(self) -> int:
        """Moves per transition (the larger half's)."""
        return max(len(c) for c in self.coords)


def _fit_half(x: np.ndarray, w: np.ndarray | None, c: float):
    n = x.shape[0]
    w = np.full(n, 1.0 / n) if w is None else w
    m = w @ x
    xc = x - m
    sd_x = np.sqrt(w @ (xc * xc))
    floor = 1e-12 * np.maximum(sd_x, 1e-300)
    L = np.log(np.maximum(np.abs(xc), floor))
    Lc = L - w @ L
    sd_l = np.sqrt(w @ (Lc * Lc))
    cov = (xc * w[:, None]).T @ Lc  # (d, d): cov(x_i, L_j)
    with np.errstate(divide="ignore", invalid="ignore"):
        corr = cov / (sd_x[:, None] * sd_l[None, :])
        slope = cov / (sd_x[:, None] ** 2)
    ok = np.isfinite(corr) & np.isfinite(slope) & (sd_x[:, None] > 0)
    corr = np.where(ok, corr, 0.0)
    np.fill_diagonal(corr, 0.0)
    block = np.abs(corr) >= MIN_CORRELATION
    size = block.sum(axis=1)
    strength = np.where(block, corr * corr, 0.0).sum(axis=1)
    cand = np.flatnonzero(size >= MIN_BLOCK)
    cand = cand[np.argsort(-strength[cand], kind="stable")][:MAX_MOVES]
    slopes = np.where(block[cand], np.where(ok[cand], slope[cand], 0.0), 0.0)
    return cand, slopes, m, c * sd_x[cand]


def fit_scale_moves(
    x: np.ndarray, weights: np.ndarray | None, groups: np.ndarray | None = None, log_c: float = 0.0
) -> ScaleMoves | None:
    """Scale moves fitted to the two halves of a population (see the module docstring).

    Parameters
    ----------
    x : numpy.ndarray, shape (N, d)
    weights : numpy.ndarray, shape (N,), or None
        Normalized weights of the particles (``None``: equal).
    groups : numpy.ndarray of int, shape (N,), or None
        The half (0 / 1) of each particle; ``None``: even and odd rows.
    log_c : float, default 0.0
        Log of the proposal scale relative to ``sd(x_i)``.

    Returns
    -------
    ScaleMoves or None
        ``None`` when ``d < 3``, a half has fewer than 8 particles, or neither half finds a
        block.
    """
    d = x.shape[1]
    if d < MIN_BLOCK + 1:
        return None
    halves = split_halves(x, weights, groups)
    if min(h[0].shape[0] for h in halves) < 8:
        return None
    c = float(np.exp(np.clip(log_c, *LOG_C_RANGE)))
    fits = [_fit_half(xh, wh, c) for xh, wh in halves]
    if all(f[0].size == 0 for f in fits):
        return None
    return ScaleMoves(
        tuple(f[0] for f in fits),
        tuple(f[1] for f in fits),
        tuple(f[2] for f in fits),
        tuple(f[3] for f in fits),
        float(np.clip(log_c, *LOG_C_RANGE)),
        groups,
    )


def adapt_log_c(log_c: float, acceptance: float, gain: float = 1.0) -> float:
    """``log c`` moved towards :data:`TARGET_ACCEPT` after a transition with ``acceptance``."""
    if not np.isfinite(acceptance):
        return log_c
    return float(np.clip(log_c + gain * (acceptance - TARGET_ACCEPT), *LOG_C_RANGE))


def scale_move_step(
    rng: np.random.Generator,
    state: ParticleState,
    density,
    path,
    tau,
    moves: ScaleMoves,
    repeats: int = 1,
):
    """``repeats`` scale moves per fitted coordinate, each one batched call of the model.

    Returns ``(state, acceptance, n_evals)``: the mean acceptance probability over the moves
    and the particles they apply to (NaN when none did), and the particle-evaluations.
    """
    n, d = state.x.shape
    if moves.groups is not None and moves.groups.shape[0] != n:
        return state, np.nan, 0
    if moves.groups is None:
        parity = np.arange(n) % 2
    else:
        parity = np.asarray(moves.groups)
    # the particles of half h move with the fit of half 1 − h
    src = 1 - parity
    probs, n_evals = [], 0
    for k in np.tile(np.arange(moves.n_moves), max(int(repeats), 1)):
        has = np.array([k < len(moves.coords[h]) for h in (0, 1)])
        active = has[src]
        if not active.any():
            continue
        i_of = np.array([moves.coords[h][k] if has[h] else 0 for h in (0, 1)])
        slope = np.stack([moves.slopes[h][k] if has[h] else np.zeros(d) for h in (0, 1)])
        center = np.stack(moves.center)
        sigma = np.array([moves.sigma[h][k] if has[h] else 0.0 for h in (0, 1)])
        s = rng.standard_normal(n) * sigma[src] * active
        b = slope[src]  # (n, d)
        m = center[src]
        x = state.x
        with np.errstate(over="ignore", invalid="ignore"):
            scaled = np.where(b != 0.0, m + (x - m) * np.exp(b * s[:, None]), x)
            scaled[np.arange(n), i_of[src]] += s
            proposal = ParticleState.evaluate(density, scaled, gradient=state.has_gradient)
            log_ratio = (
                proposal.log_density(path, tau) - state.log_density(path, tau) + s * b.sum(axis=1)
            )
        ok = np.isfinite(scaled).all(axis=1) & active & ~np.isnan(log_ratio)
        log_ratio = np.where(ok, log_ratio, -np.inf)
        accept, _ = metropolis_accept(rng, log_ratio)
        probs.append(np.exp(np.minimum(log_ratio[active], 0.0)))
        state = state.where(accept, proposal)
        n_evals += n
    acc = float(np.mean(np.concatenate(probs))) if probs else np.nan
    return state, acc, n_evals
